"""KIP-1279 when the MirrorCoordinator dies and when a source leader moves by election, on two
3-broker clusters (dedicated controller + brokers 1..3 each), one topic with 3 partitions and
RF=3 at both ends. The steps share the clusters and run in order:

1. the mirror copies the source (topics `orders` and `events`);
2. a source partition's leadership moves without a destination failure: kill -9 of its
   preferred leader (a non-preferred replica leads, and keeps leading after the restart),
   then `kmirror leader-election --election-type preferred` moves it back; the mirror
   follows both moves with nothing lost or duplicated;
3. kill -9 of the destination broker leading the `__mirror_state` partition(s) holding the
   mirror's partition states, while the source is written to: the leadership of those
   partitions moves, the new coordinator loads the states (`--describe` shows every partition
   MIRRORING again and never UNKNOWN once loaded), the copy continues byte-identically on
   the live replicas, then on all three after the restart;
4. pause/resume with the coordinator on its new broker;
5. kill -9 of the coordinator right after `--pause`: PAUSED under the next coordinator;
6. kill -9 of the coordinator right after `--remove --topic events`: whichever leader runs
   or resumes the detach, each partition ends with exactly one MIRROR_PID_RESET;
7. failover (`--remove --topic '.*'`): STOPPED is persisted in the moved coordinator's
   `__mirror_state` log: after a restart of the whole destination cluster `--describe`
   still shows STOPPED.

Automatic leader rebalancing is off at both ends so that leadership moves only where a step
moves it."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kmirror.kip1279.state import MirrorPartitionState
from kmirror.mirror.coordinator.codec import decode_records
from kmirror.mirror.coordinator.partitioner import partition_for
from kmirror.mirror.coordinator.records import MirrorPartitionKey, MirrorPartitionStateValue
from kmirror.mirror.service import MIRROR_STATE_TOPIC
from kmirror.records.control import ControlType, read_control_type
from kmirror.testing import kafka_clients
from kmirror.testing.acked_writer import AckedWriter, assert_acked_mirrored_once, partition_layout
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, describe, topic_id, wait_until
from kmirror.testing.processes import FAST_FAILURE_DETECTION, LocalCluster, free_port_block, kmirror
from kmirror.testing.segments import log_batches

pytestmark = pytest.mark.integration

TOPIC = "orders"
FAILOVER_TOPIC = "events"  # mirrored alongside, failed over while its coordinator dies
PARTITIONS = 3
BROKERS = (1, 2, 3)
MIRROR = "m"
OVERRIDES = {
    **FAST_FAILURE_DETECTION,
    "default.replication.factor": "3",
    "auto.leader.rebalance.enable": "false",
}


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, LocalCluster]]:
    base = tmp_path_factory.mktemp("coordfail")
    source = LocalCluster(dir=base / "source", port=free_port_block(3), nodes=3, overrides=dict(OVERRIDES))
    dest = LocalCluster(dir=base / "dest", port=free_port_block(3), nodes=3,
                        overrides={**OVERRIDES, "mirror.metadata.refresh.interval.ms": "1000"})
    with clusters_up(source, dest):
        yield source, dest


@pytest.fixture(scope="module")
def shared() -> dict[str, Any]:
    """What one step leaves for the next."""
    return {}


def attempt(probe: Any) -> Any:
    """`probe()`, or None while a broker or the metadata is briefly unavailable (elections)."""
    try:
        return probe()
    except Exception:
        return None


def broker(cluster: LocalCluster, node: int) -> str:
    return f"127.0.0.1:{cluster.port + node - 1}"


def live_bootstrap(cluster: LocalCluster, *down: int) -> str:
    return ",".join(broker(cluster, n) for n in BROKERS if n not in down)


def layout(bootstrap: str, topic: str = TOPIC) -> dict[int, tuple[int, list[int], list[int]]]:
    return partition_layout(bootstrap, topic)

def end_offsets(bootstrap: str, topic: str = TOPIC) -> list[int]:
    return kafka_clients.end_offsets(bootstrap, topic, PARTITIONS)


def replica_batches(cluster: LocalCluster, node: int, partition: int, topic: str = TOPIC) -> list[tuple[int, bytes]]:
    """(base offset, bytes) of every batch in one replica's segment files, in offset order."""
    return log_batches(cluster, topic, partition, node)


def states(bootstrap: str, topic: str = TOPIC) -> dict[int, str]:
    return {p: row[3] for (m, t, p), row in describe(bootstrap).items() if (m, t) == (MIRROR, topic)}


def caught_up(bootstrap: str, source_ends: list[int], topic: str = TOPIC) -> bool:
    rows = {p: row for (m, t, p), row in describe(bootstrap).items() if (m, t) == (MIRROR, topic)}
    return rows == {p: (source_ends[p], source_ends[p], 0, "MIRRORING") for p in range(PARTITIONS)}


def assert_identical(source: LocalCluster, dest: LocalCluster, dest_nodes: tuple[int, ...] = BROKERS,
                     topic: str = TOPIC) -> None:
    """Each listed destination replica holds the source leader's batches at the same offsets."""
    for p in range(PARTITIONS):
        leader = layout(source.bootstrap, topic)[p][0]
        expected = replica_batches(source, leader, p, topic)
        wait_until(lambda p=p, e=expected: all(replica_batches(dest, n, p, topic) == e for n in dest_nodes),
                   f"{topic}-{p}: destination replicas {dest_nodes} byte-identical to the source",
                   timeout_s=90, seen=lambda p=p: {n: len(replica_batches(dest, n, p, topic)) for n in dest_nodes})


def topic_uuid(bootstrap: str, topic: str = TOPIC) -> UUID:
    encoded = topic_id(bootstrap, topic)
    return UUID(bytes=base64.urlsafe_b64decode(encoded + "=="))  # Kafka's Uuid.toString


def coordinators(bootstrap: str, topic: str = TOPIC) -> dict[int, tuple[int, int]]:
    """Mirror partition -> (its `__mirror_state` partition, that partition's leader)."""
    uuid = topic_uuid(bootstrap, topic)
    state = layout(bootstrap, MIRROR_STATE_TOPIC)
    return {p: (sp, state[sp][0]) for p in range(PARTITIONS)
            for sp in [partition_for(MIRROR, uuid, p, len(state))]}


def state_log(bootstrap: str, state_partition: int) -> list[tuple[int, int, MirrorPartitionKey,
                                                                  MirrorPartitionStateValue | None]]:
    """(offset, batch leader epoch, key, value) of every record in one `__mirror_state`
    partition, read with a consumer up to its high watermark and decoded with the
    coordinator's codec."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "state-probe", "enable.auto.commit": False})
    try:
        tp = TopicPartition(MIRROR_STATE_TOPIC, state_partition, 0)
        end = kafka_clients.watermarks(bootstrap, MIRROR_STATE_TOPIC, state_partition)[1]
        consumer.assign([tp])
        out: list[tuple[int, int, MirrorPartitionKey, MirrorPartitionStateValue | None]] = []
        deadline = time.monotonic() + 30
        while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            (key, value), = decode_records([(msg.key(), msg.value())])
            out.append((msg.offset(), msg.leader_epoch(), key, value))
        return out
    finally:
        consumer.close()


def test_1_mirror_copies_the_source(
    clusters: tuple[LocalCluster, LocalCluster], shared: dict[str, Any], tmp_path: Path
) -> None:
    source, dest = clusters
    producer = Producer({"bootstrap.servers": source.bootstrap, "enable.idempotence": True, "acks": "all"})
    for topic in (TOPIC, FAILOVER_TOPIC):
        kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", topic,
                "--partitions", str(PARTITIONS), "--replication-factor", "3", "--config", "min.insync.replicas=2")
        wait_until(lambda t=topic: bool(attempt(lambda: all(len(isr) == 3 for _, _, isr
                                                            in layout(source.bootstrap, t).values()))),
                   f"source partitions of {topic} fully in sync")
        for i in range(300):
            producer.produce(topic, key=b"%d" % (i % 7), value=b"before %d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    create_mirror(dest, source, MIRROR, TOPIC, tmp_path / "mirror.properties")
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", MIRROR, "--topic", FAILOVER_TOPIC)
    for topic in (TOPIC, FAILOVER_TOPIC):
        source_ends = end_offsets(source.bootstrap, topic)
        wait_until(lambda t=topic, e=source_ends: bool(attempt(lambda: caught_up(dest.bootstrap, e, t))),
                   f"{topic}: lag 0, MIRRORING", timeout_s=90, seen=lambda: attempt(lambda: describe(dest.bootstrap)))
        wait_until(lambda t=topic: bool(attempt(lambda: all(len(isr) == 3 for _, _, isr
                                                            in layout(dest.bootstrap, t).values()))),
                   f"destination partitions of {topic} fully in sync")
        assert_identical(source, dest, topic=topic)
    shared["ready"] = True


def test_2_source_leader_moved_by_preferred_election(
    clusters: tuple[LocalCluster, LocalCluster], shared: dict[str, Any]
) -> None:
    assert shared.get("ready"), "step 1 did not complete"
    source, dest = clusters
    p = 1
    leader, replicas, _ = layout(source.bootstrap)[p]
    preferred = replicas[0]
    assert leader == preferred, "a new topic's leader is its preferred replica"
    writer = AckedWriter(source.bootstrap, "election", TOPIC, PARTITIONS)
    writer.start()
    try:
        at_start = end_offsets(dest.bootstrap)[p]
        wait_until(lambda: bool(attempt(lambda: end_offsets(dest.bootstrap)[p] > at_start + 20)), "copying under load")
        source.kill9(preferred)
        survivors = live_bootstrap(source, preferred)
        other = wait_until_value(lambda: (lead := layout(survivors)[p][0]) not in (-1, preferred) and lead,
                                 f"a non-preferred source leader for partition {p}")
        source.start_node(preferred)
        wait_until(lambda: bool(attempt(lambda: sorted(layout(source.bootstrap)[p][2]) == sorted(replicas))),
                   "the preferred replica back in the ISR")
        # Back in the ISR, the preferred replica does not take the leadership by itself.
        assert layout(source.bootstrap)[p][0] == other
        at_restart = end_offsets(source.bootstrap)[p]
        wait_until(lambda: bool(attempt(lambda: end_offsets(dest.bootstrap)[p] > at_restart + 20)),
                   f"the mirror to copy from the non-preferred leader {other}")

        kmirror("leader-election", "--bootstrap-server", source.bootstrap, "--election-type", "preferred",
                "--topic", TOPIC, "--partition", str(p))
        wait_until(lambda: attempt(lambda: layout(source.bootstrap)[p][0]) == preferred,
                   f"the preferred replica {preferred} leading partition {p} again")
        at_election = end_offsets(source.bootstrap)[p]
        wait_until(lambda: bool(attempt(lambda: end_offsets(dest.bootstrap)[p] > at_election + 20)),
                   f"the mirror to copy from the elected leader {preferred}")
    finally:
        writer.finish()
    assert len(writer.acked) > 100
    source_ends = end_offsets(source.bootstrap)
    wait_until(lambda: bool(attempt(lambda: caught_up(dest.bootstrap, source_ends))), "lag 0 after the elections",
               timeout_s=90, seen=lambda: attempt(lambda: describe(dest.bootstrap)))
    assert_identical(source, dest)
    assert_acked_mirrored_once(dest.bootstrap, writer, every_value_acked=True)
    shared["elected"] = True


def grown(bootstrap: str, before: list[int], by: int = 20) -> bool:
    """Whether every partition's log end passed `before` by more than `by` records."""
    now = attempt(lambda: end_offsets(bootstrap))
    return now is not None and all(now[p] > before[p] + by for p in range(PARTITIONS))


def wait_until_value(probe: Any, what: str, timeout_s: float = 90) -> Any:
    """Poll `probe` until it returns a truthy value, and return that value."""
    found: list[Any] = []

    def ready() -> bool:
        value = attempt(probe)
        if value:
            found.append(value)
        return bool(value)

    wait_until(ready, what, timeout_s)
    return found[-1]


def test_3_kill9_mirror_coordinator_mid_copy(clusters: tuple[LocalCluster, LocalCluster], shared: dict[str, Any]) -> None:
    assert shared.get("elected"), "step 2 did not complete"
    source, dest = clusters
    before = coordinators(dest.bootstrap)
    counts = {n: sum(1 for _, lead in before.values() if lead == n) for n in BROKERS}
    victim = max(counts, key=lambda n: counts[n])
    coordinated = sorted(p for p, (_, lead) in before.items() if lead == victim)
    print(f"coordinators before: {before}; killing broker {victim}, coordinator of partitions {coordinated}")
    assert coordinated
    survivors = live_bootstrap(dest, victim)
    writer = AckedWriter(source.bootstrap, "coordinator", TOPIC, PARTITIONS)
    writer.start()
    try:
        at_start = end_offsets(dest.bootstrap)
        wait_until(lambda: grown(dest.bootstrap, at_start), "copying under load")
        dest.kill9(victim)
        # The `__mirror_state` leadership of the coordinated partitions moves to a live broker.
        after = wait_until_value(lambda: (c := coordinators(survivors)) and all(
            lead not in (-1, victim) for _, lead in c.values()) and c, "the mirror coordinators to move")
        print(f"coordinators after: {after}")
        assert all(after[p][0] == before[p][0] for p in range(PARTITIONS))
        # The new coordinator loads the states: every partition MIRRORING again, and never
        # UNKNOWN (nor anything else) once loaded.
        mirroring = {p: "MIRRORING" for p in range(PARTITIONS)}
        observed: list[dict[int, str] | None] = []
        wait_until(lambda: observed.append(attempt(lambda: states(survivors))) is None and observed[-1] == mirroring,
                   "every partition MIRRORING under the new coordinator", seen=lambda: observed[-3:])
        print(f"--describe while the coordinator moved: {observed}")
        at_load = end_offsets(survivors)
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            assert states(survivors) == mirroring
            time.sleep(0.5)
        wait_until(lambda: grown(survivors, at_load), "mirroring to continue on every partition with the coordinator moved")
    finally:
        writer.finish()
    assert len(writer.acked) > 100
    source_ends = end_offsets(source.bootstrap)
    wait_until(lambda: bool(attempt(lambda: caught_up(survivors, source_ends))), "lag 0 with a broker down",
               timeout_s=90, seen=lambda: attempt(lambda: describe(survivors)))
    live = tuple(n for n in BROKERS if n != victim)
    assert_identical(source, dest, live)
    assert_acked_mirrored_once(survivors, writer, every_value_acked=True)

    dest.start_node(victim)
    wait_until(lambda: bool(attempt(lambda: all(len(isr) == 3 for _, _, isr in layout(dest.bootstrap).values()))),
               "the restarted broker back in every ISR")
    assert_identical(source, dest)
    # No automatic rebalance: the coordinators stay on their new brokers.
    assert coordinators(dest.bootstrap) == after
    shared["victim"] = victim
    shared["moved"] = {after[p][0]: end_of_state_log(dest.bootstrap, after[p][0]) for p in coordinated}


def end_of_state_log(bootstrap: str, state_partition: int) -> int:
    return kafka_clients.watermarks(bootstrap, MIRROR_STATE_TOPIC, state_partition)[1]


def test_4_pause_resume_with_the_moved_coordinator(
    clusters: tuple[LocalCluster, LocalCluster], shared: dict[str, Any]
) -> None:
    assert "victim" in shared, "step 3 did not complete"
    source, dest = clusters
    assert all(lead != shared["victim"] for _, lead in coordinators(dest.bootstrap).values())
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--pause", "--topic", TOPIC)
    wait_until(lambda: attempt(lambda: states(dest.bootstrap)) == {p: "PAUSED" for p in range(PARTITIONS)},
               "every partition PAUSED")
    paused_ends = end_offsets(dest.bootstrap)
    producer = Producer({"bootstrap.servers": source.bootstrap, "enable.idempotence": True, "acks": "all"})
    for i in range(90):
        producer.produce(TOPIC, value=b"while paused %d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    time.sleep(4)  # several manager runs at the 1 s refresh
    assert end_offsets(dest.bootstrap) == paused_ends
    assert states(dest.bootstrap) == {p: "PAUSED" for p in range(PARTITIONS)}

    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--resume", "--topic", TOPIC)
    source_ends = end_offsets(source.bootstrap)
    wait_until(lambda: bool(attempt(lambda: caught_up(dest.bootstrap, source_ends))), "lag 0 after resume",
               timeout_s=90, seen=lambda: attempt(lambda: describe(dest.bootstrap)))
    assert_identical(source, dest)
    shared["resumed"] = True


def test_5_coordinator_killed_right_after_pause(
    clusters: tuple[LocalCluster, LocalCluster], shared: dict[str, Any]
) -> None:
    assert shared.get("resumed"), "step 4 did not complete"
    source, dest = clusters
    before = coordinators(dest.bootstrap)
    counts = {n: sum(1 for _, lead in before.values() if lead == n) for n in BROKERS}
    victim = max(counts, key=lambda n: counts[n])
    coordinated = sorted(p for p, (_, lead) in before.items() if lead == victim)
    print(f"coordinators before: {before}; killing broker {victim} right after --pause")
    survivors = live_bootstrap(dest, victim)
    paused = {p: "PAUSED" for p in range(PARTITIONS)}
    # The PAUSING -> PAUSED transition runs while (or just before) its coordinator dies.
    kmirror("mirrors", "--bootstrap-server", survivors, "--pause", "--topic", TOPIC)
    dest.kill9(victim)
    after = wait_until_value(lambda: (c := coordinators(survivors)) and all(
        lead not in (-1, victim) for _, lead in c.values()) and c, "the mirror coordinators to move")
    wait_until(lambda: attempt(lambda: states(survivors)) == paused, "every partition PAUSED under the new coordinator",
               seen=lambda: attempt(lambda: describe(survivors)))
    paused_ends = end_offsets(survivors)
    producer = Producer({"bootstrap.servers": source.bootstrap, "enable.idempotence": True, "acks": "all"})
    for i in range(90):
        producer.produce(TOPIC, value=b"paused, coordinator down %d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    time.sleep(4)  # several manager runs at the 1 s refresh
    assert end_offsets(survivors) == paused_ends
    dest.start_node(victim)
    wait_until(lambda: bool(attempt(lambda: all(len(isr) == 3 for _, _, isr in layout(dest.bootstrap).values()))),
               "the restarted broker back in every ISR")
    assert states(dest.bootstrap) == paused
    assert end_offsets(dest.bootstrap) == paused_ends

    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--resume", "--topic", TOPIC)
    source_ends = end_offsets(source.bootstrap)
    wait_until(lambda: bool(attempt(lambda: caught_up(dest.bootstrap, source_ends))), "lag 0 after resume",
               timeout_s=90, seen=lambda: attempt(lambda: describe(dest.bootstrap)))
    assert_identical(source, dest)
    assert coordinators(dest.bootstrap) == after
    shared["moved"] = {after[p][0]: end_of_state_log(dest.bootstrap, after[p][0]) for p in coordinated}
    shared["paused_under_kill"] = True


def test_6_failover_while_its_coordinator_dies(
    clusters: tuple[LocalCluster, LocalCluster], shared: dict[str, Any]
) -> None:
    assert shared.get("paused_under_kill"), "step 5 did not complete"
    source, dest = clusters
    source_ends = end_offsets(source.bootstrap, FAILOVER_TOPIC)
    wait_until(lambda: bool(attempt(lambda: caught_up(dest.bootstrap, source_ends, FAILOVER_TOPIC))),
               f"{FAILOVER_TOPIC}: lag 0", seen=lambda: attempt(lambda: describe(dest.bootstrap)))
    source_layout = layout(source.bootstrap, FAILOVER_TOPIC)
    mirrored = {p: replica_batches(source, source_layout[p][0], p, FAILOVER_TOPIC) for p in range(PARTITIONS)}
    before = coordinators(dest.bootstrap, FAILOVER_TOPIC)
    leaders = {p: lead for p, (lead, _, _) in layout(dest.bootstrap, FAILOVER_TOPIC).items()}
    # The broker coordinating the most partitions of the topic, preferably a leader of one.
    victim = max(BROKERS, key=lambda n: (sum(lead == n for _, lead in before.values()), n in leaders.values()))
    print(f"{FAILOVER_TOPIC} coordinators {before}, leaders {leaders}: killing broker {victim} right after --remove")
    survivors = live_bootstrap(dest, victim)
    out = kmirror("mirrors", "--bootstrap-server", survivors, "--remove", "--topic", FAILOVER_TOPIC).stdout
    dest.kill9(victim)
    assert f"Removed 1 topic(s) from mirror {MIRROR}: [{FAILOVER_TOPIC}]" in out
    stopped = {p: "STOPPED" for p in range(PARTITIONS)}
    wait_until(lambda: attempt(lambda: states(survivors, FAILOVER_TOPIC)) == stopped,
               f"every partition of {FAILOVER_TOPIC} STOPPED", seen=lambda: attempt(lambda: describe(survivors)))
    dest.start_node(victim)
    wait_until(lambda: bool(attempt(lambda: all(len(isr) == 3 for _, _, isr
                                                in layout(dest.bootstrap, FAILOVER_TOPIC).values()))),
               "the restarted broker back in every ISR")
    # Whichever leader ran (or resumed) the detach: the mirrored prefix, then exactly one
    # MIRROR_PID_RESET at the source log end, on every replica.
    assert end_offsets(dest.bootstrap, FAILOVER_TOPIC) == [end + 1 for end in source_ends]
    for p in range(PARTITIONS):
        after = replica_batches(dest, layout(dest.bootstrap, FAILOVER_TOPIC)[p][0], p, FAILOVER_TOPIC)
        assert after[:-1] == mirrored[p]
        (reset_offset, reset_raw) = after[-1]
        assert reset_offset == source_ends[p]
        assert read_control_type(reset_raw, 0) is ControlType.MIRROR_PID_RESET
        wait_until(lambda p=p, a=after: all(replica_batches(dest, n, p, FAILOVER_TOPIC) == a for n in BROKERS),
                   f"{FAILOVER_TOPIC}-{p}: every replica after failover")
    assert states(dest.bootstrap) == {p: "MIRRORING" for p in range(PARTITIONS)}  # the other topic goes on
    shared["failed_over_under_kill"] = True


def test_7_failover_persisted_by_the_moved_coordinator(
    clusters: tuple[LocalCluster, LocalCluster], shared: dict[str, Any]
) -> None:
    assert shared.get("failed_over_under_kill"), "step 6 did not complete"
    source, dest = clusters
    moved = coordinators(dest.bootstrap)
    out = kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", ".*").stdout
    assert f"Removed 1 topic(s) from mirror {MIRROR}: [{TOPIC}]" in out
    wait_until(lambda: attempt(lambda: states(dest.bootstrap)) == {p: "STOPPED" for p in range(PARTITIONS)},
               "every partition STOPPED")
    assert coordinators(dest.bootstrap) == moved
    ends = end_offsets(dest.bootstrap)
    # The STOPPED states of the partitions whose coordinator moved were appended to the moved
    # `__mirror_state` partitions after the move.
    topic = topic_uuid(dest.bootstrap)
    for state_partition, end_after_move in shared["moved"].items():
        records = state_log(dest.bootstrap, state_partition)
        for p in (p for p in range(PARTITIONS) if moved[p][0] == state_partition):
            offset, _, _, value = [r for r in records if r[2] == MirrorPartitionKey(MIRROR, topic, p)][-1]
            assert value is not None and value.state is MirrorPartitionState.STOPPED
            assert offset >= end_after_move, (offset, end_after_move)

    dest.down()
    dest.up()
    stopped = {p: "STOPPED" for p in range(PARTITIONS)}
    wait_until(lambda: attempt(lambda: (states(dest.bootstrap), states(dest.bootstrap, FAILOVER_TOPIC)))
               == (stopped, stopped), "STOPPED after a restart of the whole destination cluster",
               seen=lambda: attempt(lambda: describe(dest.bootstrap)))
    # Failed over: the topic is writable, after the mirrored prefix and MIRROR_PID_RESET.
    producer = Producer({"bootstrap.servers": dest.bootstrap, "enable.idempotence": True, "acks": "all"})
    delivered: list[tuple[int, int]] = []
    for p in range(PARTITIONS):
        producer.produce(TOPIC, value=b"after failover", partition=p,
                         on_delivery=lambda err, msg: delivered.append((msg.partition(), msg.offset())) if err is None
                         else None)
    assert producer.flush(60) == 0
    assert sorted(delivered) == [(p, ends[p]) for p in range(PARTITIONS)]
