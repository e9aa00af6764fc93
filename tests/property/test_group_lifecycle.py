"""Any sequence of join/sync/heartbeat/leave/expiry events keeps the classic group's
invariants (illegal state transitions raise inside the core, failing the example)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from kmirror.coordinator.group.state import GroupState
from kmirror.coordinator.results import JoinResult
from kmirror.protocol.errors import ErrorCode as E
from kmirror.testing.groups import CoreHarness

CLIENTS = 4
events = st.lists(
    st.tuples(
        st.sampled_from(["join", "rejoin", "sync", "heartbeat", "leave", "tick", "rejoin_all", "sync_all"]),
        st.integers(0, CLIENTS - 1),
        st.integers(0, 12_000),
        st.booleans(),
    ),
    max_size=40,
)


def check_invariants(h: CoreHarness, last_generation: int) -> int:
    group = h.core.groups.get("g")
    if group is None:
        return last_generation
    assert group.generation_id >= last_generation
    if group.members:
        assert group.leader_id in group.members
    if group.is_in(GroupState.STABLE):
        # The leader assigned every member of the generation; nobody joined since.
        for member in group.members.values():
            assert member.assignment == f"a-{member.member_id}".encode()
            assert not member.awaiting_join
    if group.is_in(GroupState.EMPTY):
        assert not group.members
    for group_id, member_id in list(h.core.state.pending_joins) + list(h.core.state.pending_syncs):
        assert group_id == "g" and member_id in group.members
    return group.generation_id


@settings(max_examples=300, deadline=None)
@given(events, st.sampled_from([0, 3000]))
def test_group_invariants_hold(steps, initial_delay_ms):
    h = CoreHarness(group_initial_rebalance_delay_ms=initial_delay_ms)
    ids: dict[int, str] = {}
    generation = 0
    for op, client, ms, flag in steps:
        group = h.core.groups.get("g")
        member_id = ids.get(client, "")
        if op == "join":
            rid = h.join(member_id if flag else "", client_id=f"c{client}", protocols=("range", "rr") if flag else ("range",))
            result = h.responses.get(rid)
            if isinstance(result, JoinResult) and result.member_id:
                if result.error in (E.member_id_required, E.none):
                    ids[client] = result.member_id
                    if result.error == E.member_id_required:
                        h.join(result.member_id, client_id=f"c{client}")
        elif op == "rejoin" and member_id:
            h.join(member_id, client_id=f"c{client}")
        elif op == "sync" and member_id and group is not None:
            gen = group.generation_id if flag else group.generation_id - 1
            assignments = {m: f"a-{m}".encode() for m in group.members}
            h.sync(member_id, gen, assignments)
        elif op == "heartbeat" and member_id and group is not None:
            h.core.heartbeat(group_id="g", generation_id=group.generation_id, member_id=member_id)
        elif op == "leave" and member_id:
            h.leave(member_id)
        elif op == "rejoin_all" and group is not None:
            for m in list(group.members):
                h.join(m, client_id="c")
        elif op == "sync_all" and group is not None:
            # Followers first, the leader last (flag: the leader first).
            order = sorted(group.members, key=lambda m: (m == group.leader_id) != flag)
            assignments = {m: f"a-{m}".encode() for m in group.members}
            for m in order:
                h.sync(m, group.generation_id, assignments)
        elif op == "tick":
            h.advance(ms)
        generation = check_invariants(h, generation)
