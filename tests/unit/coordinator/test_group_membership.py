from kmirror.coordinator.group.state import GroupState
from kmirror.protocol.errors import ErrorCode as E
from kmirror.testing.groups import CoreHarness


def stable_group(n: int = 1) -> tuple[CoreHarness, list[str]]:
    h = CoreHarness()
    members = []
    for i in range(n):
        members.append(h.new_member(client_id=f"c{i}"))
        if i > 0:
            # A new member triggers a rebalance: the existing members rejoin.
            for m in members[:-1]:
                h.join(m)
    group = h.core.groups["g"]
    assert group.state is GroupState.COMPLETING_REBALANCE
    gen = group.generation_id
    for m in members:
        if m != group.leader_id:
            h.sync(m, gen)
    h.sync(group.leader_id, gen, {m: f"a-{m}".encode() for m in members})
    assert group.state is GroupState.STABLE
    return h, members


def test_first_join_v4_requires_member_id():
    h = CoreHarness()
    rid = h.join()
    result = h.responses[rid]
    assert result.error == E.member_id_required
    assert result.member_id == "c-uuid1"
    assert h.core.groups["g"].state is GroupState.EMPTY
    assert "c-uuid1" in h.core.groups["g"].pending_members


def test_join_without_handshake_before_v4():
    h = CoreHarness()
    result = h.responses[h.join(require_known=False)]
    assert result.error == E.none
    assert result.member_id == "c-uuid1" and result.leader == "c-uuid1"
    assert result.generation_id == 1 and result.protocol_name == "range"


def test_single_member_rebalance_completes_and_leader_gets_members():
    h = CoreHarness()
    m = h.new_member()
    result = h.responses[h.pending]
    assert result.error == E.none
    assert result.generation_id == 1
    assert result.leader == m and result.member_id == m
    assert [x.member_id for x in result.members] == [m]
    assert h.core.groups["g"].state is GroupState.COMPLETING_REBALANCE


def test_sync_distributes_leader_assignment_after_persisting():
    h, (a, b) = stable_group(2)
    group = h.core.groups["g"]
    assert group.state is GroupState.STABLE
    syncs = [r for r in h.responses.values() if type(r).__name__ == "SyncResult"]
    assert sorted(r.assignment for r in syncs) == sorted([f"a-{a}".encode(), f"a-{b}".encode()])
    # The generation's metadata was appended before the syncs were answered.
    assert len(h.log.partitions[0]) >= 1


def test_follower_sync_waits_for_leader():
    h = CoreHarness()
    a = h.new_member(client_id="a")
    b = h.new_member(client_id="b")
    h.join(a)
    group = h.core.groups["g"]
    follower = b if group.leader_id == a else a
    rid = h.sync(follower, group.generation_id)
    assert rid not in h.responses
    h.sync(group.leader_id, group.generation_id, {follower: b"x"})
    assert h.responses[rid].error == E.none and h.responses[rid].assignment == b"x"


def test_members_missing_from_leader_assignment_get_empty():
    h, (a, b) = 0, ("", "")
    h = CoreHarness()
    a = h.new_member(client_id="a")
    b = h.new_member(client_id="b")
    h.join(a)
    group = h.core.groups["g"]
    follower = b if group.leader_id == a else a
    h.sync(group.leader_id, group.generation_id, {})
    assert h.responses[h.sync(follower, group.generation_id)].assignment == b""


def test_heartbeat_errors():
    h, (m,) = stable_group(1)
    core = h.core
    assert core.heartbeat(group_id="g", generation_id=1, member_id=m) == E.none
    assert core.heartbeat(group_id="g", generation_id=0, member_id=m) == E.illegal_generation
    assert core.heartbeat(group_id="g", generation_id=1, member_id="x") == E.unknown_member_id
    assert core.heartbeat(group_id="nope", generation_id=1, member_id=m) == E.unknown_member_id
    h.new_member(client_id="other")
    assert core.groups["g"].state is GroupState.PREPARING_REBALANCE
    assert core.heartbeat(group_id="g", generation_id=1, member_id=m) == E.rebalance_in_progress


def test_new_member_triggers_rebalance_that_waits_for_existing_members():
    h, (a,) = stable_group(1)
    b = h.new_member(client_id="b")
    pending_b = h.pending
    assert pending_b not in h.responses  # a has not rejoined yet
    rid_a = h.join(a)
    assert h.responses[rid_a].generation_id == 2
    assert h.responses[pending_b].generation_id == 2
    assert {x.member_id for x in h.responses[rid_a].members} == {a, b}


def test_rebalance_timeout_removes_members_that_did_not_rejoin():
    h, (a,) = stable_group(1)
    b = h.new_member(client_id="b", rebalance_ms=5000)
    group = h.core.groups["g"]
    # a keeps heartbeating (REBALANCE_IN_PROGRESS) but never rejoins: the rebalance times
    # out after the group's largest rebalance timeout (a's 30 s) and completes without a.
    for _ in range(5):
        h.advance(5_000)
        assert h.core.heartbeat(group_id="g", generation_id=1, member_id=a) == E.rebalance_in_progress
    assert group.generation_id == 1
    h.advance(5_000)
    assert list(group.members) == [b]
    assert group.state is GroupState.COMPLETING_REBALANCE and group.generation_id == 2
    assert h.responses[h.pending].leader == b


def test_session_expiry_removes_member_and_empties_group():
    h, (m,) = stable_group(1)
    h.advance(9_999)
    assert m in h.core.groups["g"].members
    h.advance(1)
    group = h.core.groups["g"]
    assert group.members == {}
    assert group.state is GroupState.EMPTY
    assert group.generation_id == 2


def test_heartbeat_keeps_session_alive():
    h, (m,) = stable_group(1)
    for _ in range(5):
        h.advance(5_000)
        assert h.core.heartbeat(group_id="g", generation_id=1, member_id=m) == E.none
    assert m in h.core.groups["g"].members


def test_leave_batch_v3():
    h, (a, b) = stable_group(2)
    rid = h.leave(a, "ghost")
    result = h.responses[rid]
    assert result.error == E.none
    assert [(x.member_id, x.error) for x in result.members] == [(a, E.none), ("ghost", E.unknown_member_id)]
    group = h.core.groups["g"]
    assert a not in group.members
    assert group.state is GroupState.PREPARING_REBALANCE


def test_last_member_leaving_empties_group():
    h, (a,) = stable_group(1)
    h.leave(a)
    assert h.core.groups["g"].state is GroupState.EMPTY


def test_leave_of_unknown_group():
    h = CoreHarness()
    result = h.responses[h.leave("x", group="none")]
    assert result.error == E.none and result.members[0].error == E.unknown_member_id


def test_invalid_session_timeout():
    h = CoreHarness()
    assert h.responses[h.join(session_ms=10)].error == E.invalid_session_timeout
    assert h.responses[h.join(session_ms=10**8)].error == E.invalid_session_timeout


def test_inconsistent_protocols():
    h, (a,) = stable_group(1)
    assert h.responses[h.join(protocols=("other",))].error == E.inconsistent_group_protocol
    assert h.responses[h.join(protocol_type="connect")].error == E.inconsistent_group_protocol
    assert h.responses[h.join(protocols=())].error == E.inconsistent_group_protocol


def test_unknown_member_id_on_join():
    h = CoreHarness()
    assert h.responses[h.join("who")].error == E.unknown_member_id


def test_group_max_size():
    h = CoreHarness(group_max_size=1)
    h.new_member()
    assert h.responses[h.join(client_id="b")].error == E.group_max_size_reached


def test_not_coordinator_and_loading():
    h = CoreHarness(offsets_topic_num_partitions=2)
    h.core.unload(0)
    h.core.begin_load(1)
    from kmirror.coordinator.offsets.partitioner import partition_for

    g0 = next(f"g{i}" for i in range(100) if partition_for(f"g{i}", 2) == 0)
    g1 = next(f"g{i}" for i in range(100) if partition_for(f"g{i}", 2) == 1)
    assert h.responses[h.join(group=g0)].error == E.not_coordinator
    assert h.responses[h.join(group=g1)].error == E.coordinator_load_in_progress
    assert h.core.heartbeat(group_id=g0, generation_id=1, member_id="m") == E.not_coordinator


def test_initial_rebalance_delay_waits_for_more_members():
    h = CoreHarness(group_initial_rebalance_delay_ms=3000)
    a = h.new_member(client_id="a")
    pending_a = h.pending
    assert pending_a not in h.responses
    h.advance(2000)
    b = h.new_member(client_id="b")
    pending_b = h.pending
    h.advance(2000)  # the second join pushed the deadline out by the delay
    assert pending_a not in h.responses
    h.advance(1000)
    assert h.responses[pending_a].generation_id == 1
    assert {m.member_id for m in h.responses[pending_a].members} | {h.responses[pending_b].member_id} == {a, b}


def test_sync_errors():
    h, (m,) = stable_group(1)
    assert h.responses[h.sync(m, 7)].error == E.illegal_generation
    assert h.responses[h.sync("x", 1)].error == E.unknown_member_id
    assert h.responses[h.sync(m, 1)].assignment == f"a-{m}".encode()  # Stable: current assignment
    h.new_member(client_id="b")
    assert h.responses[h.sync(m, 1)].error == E.rebalance_in_progress


def test_sync_timeout_removes_members_that_never_synced():
    h = CoreHarness()
    a = h.new_member(client_id="a")
    b = h.new_member(client_id="b")
    h.join(a)
    group = h.core.groups["g"]
    leader = group.leader_id
    follower = b if leader == a else a
    h.sync(leader, group.generation_id, {})
    # Both heartbeat, but the follower never sends SyncGroup within the rebalance timeout.
    for _ in range(3):
        h.advance(9_000)
        for m in (leader, follower):
            assert h.core.heartbeat(group_id="g", generation_id=2, member_id=m) == E.none
    h.advance(3_000)
    assert list(group.members) == [leader]
    assert group.state is GroupState.PREPARING_REBALANCE


def test_stable_follower_rejoin_with_same_protocols_gets_current_generation():
    h, (a, b) = stable_group(2)
    group = h.core.groups["g"]
    follower = b if group.leader_id == a else a
    result = h.responses[h.join(follower)]
    assert result.error == E.none and result.generation_id == group.generation_id and result.members == ()
    assert group.state is GroupState.STABLE
