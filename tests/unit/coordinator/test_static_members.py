"""Static group membership (KIP-345) in the classic group coordinator: restart without a
rebalance, fencing of the old instance, LeaveGroup by instance id, persistence."""

from __future__ import annotations

from kmirror.coordinator.group.member import Protocol
from kmirror.coordinator.group.state import GroupState
from kmirror.coordinator.offsets.commits import OffsetToCommit, commit_offsets
from kmirror.protocol.errors import ErrorCode as E
from kmirror.testing.groups import CoreHarness


def static_group(n: int = 3, protocols: tuple[str, ...] = ("range",)) -> tuple[CoreHarness, list[str]]:
    """A Stable group of static members i0..i{n-1}; member k is assigned b"a-i{k}"."""
    h = CoreHarness()
    group = None
    for i in range(n):
        h.join(client_id=f"c{i}", instance_id=f"i{i}", protocols=protocols)
        group = h.core.groups["g"]
        for k in range(i):  # a new member: the others rejoin
            h.join(group.static_members[f"i{k}"], instance_id=f"i{k}", protocols=protocols)
    assert group is not None and group.state is GroupState.COMPLETING_REBALANCE
    ids = [group.static_members[f"i{k}"] for k in range(n)]
    gen = group.generation_id
    for k, m in enumerate(ids):
        if m != group.leader_id:
            h.sync(m, gen, instance_id=f"i{k}")
    h.sync(group.leader_id or "", gen, {m: f"a-i{k}".encode() for k, m in enumerate(ids)},
           instance_id=f"i{ids.index(group.leader_id or '')}")
    assert group.state is GroupState.STABLE
    return h, ids


def heartbeat(h: CoreHarness, member_id: str, instance_id: str | None) -> E:
    group = h.core.groups["g"]
    return h.core.heartbeat(group_id="g", generation_id=group.generation_id, member_id=member_id,
                            group_instance_id=instance_id)


def test_static_member_joins_without_member_id_required():
    h = CoreHarness()
    result = h.responses[h.join(instance_id="i0")]
    assert result.error == E.none
    assert result.member_id == "i0-uuid1"
    assert h.core.groups["g"].static_members == {"i0": "i0-uuid1"}


def test_restarted_follower_gets_its_assignment_without_a_rebalance():
    h, ids = static_group()
    group = h.core.groups["g"]
    follower = next(i for i in range(3) if ids[i] != group.leader_id)
    gen = group.generation_id
    result = h.responses[h.join(client_id="c", instance_id=f"i{follower}")]
    assert result.error == E.none
    new_id = result.member_id
    assert new_id != ids[follower] and new_id.startswith(f"i{follower}-")
    assert result.generation_id == gen and result.members == () and not result.skip_assignment
    assert group.state is GroupState.STABLE and group.generation_id == gen
    assert group.static_members[f"i{follower}"] == new_id and ids[follower] not in group.members
    synced = h.responses[h.sync(new_id, gen, instance_id=f"i{follower}")]
    assert synced.error == E.none and synced.assignment == f"a-i{follower}".encode()
    # the others see no rebalance
    for k, m in enumerate(ids):
        if k != follower:
            assert heartbeat(h, m, f"i{k}") == E.none
    # the old process is fenced
    assert heartbeat(h, ids[follower], f"i{follower}") == E.fenced_instance_id


def test_restarted_leader_keeps_leadership_with_skip_assignment():
    h, ids = static_group()
    group = h.core.groups["g"]
    leader_k = ids.index(group.leader_id or "")
    gen = group.generation_id
    result = h.responses[h.join(instance_id=f"i{leader_k}")]
    assert result.error == E.none and result.skip_assignment
    assert result.leader == result.member_id == group.leader_id
    assert {m.member_id for m in result.members} == set(group.members)
    assert group.state is GroupState.STABLE and group.generation_id == gen
    synced = h.responses[h.sync(result.member_id, gen, instance_id=f"i{leader_k}")]
    assert synced.assignment == f"a-i{leader_k}".encode()


def test_restarted_leader_before_join_v9_is_answered_as_a_follower():
    h, ids = static_group()
    group = h.core.groups["g"]
    old_leader = group.leader_id
    leader_k = ids.index(old_leader or "")
    result = h.responses[h.join(instance_id=f"i{leader_k}", skip_assignment=False)]
    assert result.error == E.none and not result.skip_assignment
    assert result.leader == old_leader and result.members == ()
    assert group.leader_id == result.member_id and group.state is GroupState.STABLE


def test_known_leader_rejoining_with_its_member_id_rebalances():
    h, ids = static_group()
    group = h.core.groups["g"]
    leader_k = ids.index(group.leader_id or "")
    h.join(ids[leader_k], instance_id=f"i{leader_k}")
    assert group.state is GroupState.PREPARING_REBALANCE


def test_static_rejoin_that_changes_the_selected_protocol_rebalances():
    h, ids = static_group(1, protocols=("range", "roundrobin"))
    group = h.core.groups["g"]
    assert group.protocol_name == "range"
    rid = h.join(instance_id="i0", protocols=("roundrobin",))
    result = h.responses[rid]
    # a group of one completes its rebalance at once, with the new protocol
    assert result.error == E.none and result.generation_id == 2
    assert group.protocol_name == "roundrobin" and group.state is GroupState.COMPLETING_REBALANCE


def test_old_instance_is_fenced_on_every_request():
    h, ids = static_group()
    group = h.core.groups["g"]
    gen = group.generation_id
    new_id = h.responses[h.join(instance_id="i1")].member_id
    old = ids[1]
    assert heartbeat(h, old, "i1") == E.fenced_instance_id
    assert h.responses[h.sync(old, gen, instance_id="i1")].error == E.fenced_instance_id
    assert h.responses[h.join(old, instance_id="i1")].error == E.fenced_instance_id
    rid = h.next_request_id()
    out = h.run(commit_offsets(h.core, rid, group_id="g", generation_id=gen, member_id=old, group_instance_id="i1",
                               offsets=[OffsetToCommit("t", 0, 5, -1, None)]))
    assert [p.error for p in dict(out.responses)[rid].partitions] == [E.fenced_instance_id]
    leave = h.responses[h.leave_members([(old, "i1")])]
    assert [m.error for m in leave.members] == [E.fenced_instance_id]
    assert group.static_members["i1"] == new_id and group.state is GroupState.STABLE
    # an instance id the group does not know
    assert heartbeat(h, new_id, "nope") == E.unknown_member_id


def test_leave_group_by_instance_id_batch():
    h, ids = static_group()
    group = h.core.groups["g"]
    leave = h.responses[h.leave_members([("", "i1"), ("", "nope"), ("stale", "i2"), (ids[0], "i0")])]
    assert [(m.member_id, m.group_instance_id, m.error) for m in leave.members] == [
        ("", "i1", E.none), ("", "nope", E.unknown_member_id), ("stale", "i2", E.fenced_instance_id),
        (ids[0], "i0", E.none),
    ]
    assert set(group.static_members) == {"i2"} and set(group.members) == {ids[2]}
    assert group.state is GroupState.PREPARING_REBALANCE


def test_stopped_static_member_stays_until_its_session_expires():
    h, ids = static_group(3)
    group = h.core.groups["g"]
    # i2 stops without LeaveGroup; the others heartbeat
    for _ in range(9):
        h.advance(1_000)
        assert heartbeat(h, ids[0], "i0") == E.none and heartbeat(h, ids[1], "i1") == E.none
    assert ids[2] in group.members and group.state is GroupState.STABLE
    h.advance(1_500)
    assert ids[2] not in group.members and "i2" not in group.static_members
    assert group.state is GroupState.PREPARING_REBALANCE


def test_restart_within_session_timeout_keeps_the_group_stable():
    h, ids = static_group(3)
    group = h.core.groups["g"]
    gen = group.generation_id
    h.advance(8_000)  # i2's process is down for 8 s of its 10 s session
    for k in (0, 1):
        assert heartbeat(h, ids[k], f"i{k}") == E.none
    result = h.responses[h.join(instance_id="i2")]
    assert result.error == E.none and group.state is GroupState.STABLE
    assert h.responses[h.sync(result.member_id, gen, instance_id="i2")].assignment == b"a-i2"
    h.advance(5_000)  # the old member id's session deadline is gone with it
    assert group.state is GroupState.STABLE and set(group.members) == {ids[0], ids[1], result.member_id}


def test_rebalance_keeps_a_static_member_that_did_not_rejoin():
    h, ids = static_group(3)
    group = h.core.groups["g"]
    h.new_member(client_id="dyn")  # a dynamic member joins: rebalance
    assert group.state is GroupState.PREPARING_REBALANCE
    h.join(ids[0], instance_id="i0")
    h.join(ids[1], instance_id="i1")
    for _ in range(6):  # i2 is alive (it heartbeats) but never rejoins within the rebalance timeout
        assert heartbeat(h, ids[2], "i2") == E.rebalance_in_progress
        h.advance(5_000)
    assert group.state is GroupState.COMPLETING_REBALANCE
    assert ids[2] in group.members and group.static_members["i2"] == ids[2]
    assert group.leader_id != ids[2] or group.members[ids[2]].awaiting_join


def test_waiting_join_of_the_old_member_id_is_fenced():
    h, ids = static_group(2)
    group = h.core.groups["g"]
    h.new_member(client_id="dyn")
    old_join = h.join(ids[1], instance_id="i1")  # waits for the rebalance
    assert old_join not in h.responses
    h.join(instance_id="i1")  # the instance restarted meanwhile
    assert h.responses[old_join].error == E.fenced_instance_id
    assert group.static_members["i1"] != ids[1]


def test_instance_mapping_survives_coordinator_failover():
    h, ids = static_group(3)
    h2 = CoreHarness()
    h2.core.begin_load(0)
    h2.core.complete_load(0, h.log.read_all(0))
    group = h2.core.groups["g"]
    assert group.static_members == {f"i{k}": ids[k] for k in range(3)}
    assert group.state is GroupState.STABLE
    result = h2.responses[h2.join(instance_id="i1")]
    assert result.error == E.none and group.state is GroupState.STABLE
    synced = h2.responses[h2.sync(result.member_id, group.generation_id, instance_id="i1")]
    assert synced.assignment == b"a-i1"
    assert heartbeat(h2, ids[1], "i1") == E.fenced_instance_id


def test_failed_store_of_the_new_member_id_undoes_the_replacement():
    h, ids = static_group()
    group = h.core.groups["g"]
    rid = h.next_request_id()
    out = h.core.join(
        rid, group_id="g", member_id="", group_instance_id="i1", client_id="c", client_host="/127.0.0.1",
        session_timeout_ms=10_000, rebalance_timeout_ms=30_000, protocol_type="consumer",
        protocols=(Protocol("range", b"m"),), require_known_member_id=True, supports_skip_assignment=True,
    )
    assert out.responses == [] and len(out.appends) == 1
    failed = h.core.on_append_completed(out.appends[0].ticket, E.not_leader_or_follower)
    [(answered, result)] = failed.responses
    assert answered == rid and result.error == E.not_coordinator and result.member_id == ""
    assert group.static_members["i1"] == ids[1] and ids[1] in group.members
    assert heartbeat(h, ids[1], "i1") == E.none and group.state is GroupState.STABLE
