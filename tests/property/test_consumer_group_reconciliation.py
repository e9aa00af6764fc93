"""Model-based test of KIP-848 reconciliation on the sans-IO core: random joins, heartbeats,
leaves, session expiries and partition additions by simulated clients that apply every
assignment they get. After every step no partition is owned by two clients and the core's
invariants hold; once every member has heartbeated enough the group converges to a
balanced assignment that covers every partition."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kmirror.coordinator.consumer_group.messages import HeartbeatRequest
from kmirror.coordinator.consumer_group.ports import TopicInfo
from kmirror.coordinator.consumer_group.state import ConsumerGroupState
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.consumer_groups import ConsumerGroups, T

MEMBERS = ["m0", "m1", "m2", "m3"]
op = st.one_of(
    st.tuples(st.just("join"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("beat"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("advance"), st.integers(1_000, 50_000)),
    st.tuples(st.just("grow"), st.integers(1, 3)),
)


def check_core(cg: ConsumerGroups) -> None:
    group = cg.core.consumer_groups.get("g")
    if group is None:
        return
    assert group.assignment_epoch <= group.group_epoch
    for member in group.members.values():
        assert member.member_epoch <= group.assignment_epoch or member.member_epoch == -2
        for tp in member.owned():
            assert group.owners[tp] == member.member_id
    assert set(group.owners.values()) <= set(group.members)


@settings(max_examples=150, deadline=None)
@given(st.lists(op, max_size=40))
def test_no_partition_is_owned_twice_and_the_group_converges(ops: list[tuple[str, object]]) -> None:
    cg = ConsumerGroups()
    for kind, arg in ops:
        if kind == "join" and arg not in cg.clients:
            cg.join(str(arg))
        elif kind == "beat" and arg in cg.clients:
            if cg.beat(str(arg)).error in (ErrorCode.unknown_member_id, ErrorCode.fenced_member_epoch):
                del cg.clients[str(arg)]  # the client drops its partitions and would rejoin
        elif kind == "leave" and arg in cg.clients:
            cg.send(HeartbeatRequest("g", str(arg), -1))
            del cg.clients[str(arg)]
        elif kind == "advance":
            cg.h.advance(int(arg))  # type: ignore[call-overload]
            group = cg.core.consumer_groups.get("g")
            for name in [c for c in cg.clients if group is None or c not in group.members]:
                del cg.clients[name]  # expired: its partitions are gone with it
        elif kind == "grow":
            cg.topics = {"t": TopicInfo(T, cg.topics["t"].partitions + int(arg))}  # type: ignore[call-overload]
        cg.check_no_partition_owned_twice()
        check_core(cg)
    if not cg.clients:
        return
    cg.settle(rounds=8)
    group = cg.core.consumer_groups["g"]
    assert group.state is ConsumerGroupState.STABLE
    owned = [cg.owned_partitions(m) for m in cg.clients]
    assert set().union(*owned) == set(range(cg.topics["t"].partitions))
    assert max(map(len, owned)) - min(map(len, owned)) <= 1
