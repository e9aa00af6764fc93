"""Property: whatever the history (appends with acks=1 or all, lagging fetches, crashes that
lose unflushed bytes, clean elections), once every broker is back and fetches until nothing
changes, all replicas hold byte-identical logs with identical epoch caches, and every
acks=all-acknowledged record is still at its offset (seed 004, "Epoch-Based Resolution")."""

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kmirror.testing.replication_harness import ReplicationHarness

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("produce"), st.integers(1, 3), st.sampled_from([1, -1])),
        st.tuples(st.just("fetch"), st.sampled_from([1, 2, 3]), st.just(0)),
        st.tuples(st.just("crash"), st.sampled_from([1, 2, 3]), st.booleans()),
        st.tuples(st.just("tick"), st.sampled_from([100, 6000]), st.just(0)),
        st.tuples(st.just("isr"), st.just(0), st.just(0)),
    ),
    max_size=40,
)


def apply(h: ReplicationHarness, op: tuple) -> None:
    kind, a, b = op
    if kind == "produce":
        h.produce(a, b)
    elif kind == "fetch":
        h.fetch(a)
    elif kind == "tick":
        h.tick(a)
    elif kind == "isr":
        h.shrink()
        h.controller()
    elif kind == "crash":
        isr_alive = [r for r in h.registration.isr if h.brokers[r].alive]
        if all(x.alive for x in h.brokers.values()) and len(isr_alive) >= 2:
            if b:
                h.brokers[a].flush()
            h.brokers[a].crash()
            h.fence(a)
            for _ in range(3):
                for r in (1, 2, 3):
                    h.fetch(r)
            h.restart(a)


def heal(h: ReplicationHarness) -> None:
    for b, broker in h.brokers.items():
        if not broker.alive:
            h.restart(b)
    for _ in range(12):
        for b in (1, 2, 3):
            h.fetch(b)
        h.controller()


def written_epochs(log) -> list:
    return [e for e in log.epoch_cache.entries if e.start_offset < log.log_end_offset]


@settings(max_examples=int(os.environ.get("KMIRROR_PROPERTY_EXAMPLES", "60")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_replicas_converge_and_keep_acknowledged_records(ops: list) -> None:
    h = ReplicationHarness((1, 2, 3), min_isr=2, lag_ms=5000)
    for op in ops:
        apply(h, op)
    heal(h)
    leader = h.registration.leader
    expected = h.records(leader)
    leader_log = h.brokers[leader].partition.log
    for b in (1, 2, 3):
        log = h.brokers[b].partition.log
        assert h.records(b) == expected, f"broker {b} differs from leader {leader}"
        assert log.log_end_offset == leader_log.log_end_offset
        # epochs that started at the LEO without records exist only where they were assigned
        assert written_epochs(log) == written_epochs(leader_log)
    for offset, value in h.acked.items():
        assert expected.get(offset) == value
