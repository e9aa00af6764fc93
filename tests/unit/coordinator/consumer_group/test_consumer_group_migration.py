"""Online migration between the classic and the consumer group protocols (Kafka 4's
`convertToConsumerGroup` / `convertToClassicGroup`): rolling upgrades and downgrades of live
groups of eager and cooperative classic consumers, with no partition owned by two clients at
any step (`ConsumerGroups` checks it after every request), offsets kept, Kafka's refusals."""

from __future__ import annotations

import pytest

from kmirror.coordinator.consumer_group import admin as consumer_admin
from kmirror.coordinator.consumer_group.group import ConsumerGroup
from kmirror.coordinator.consumer_group.messages import HeartbeatRequest
from kmirror.coordinator.group.coordinator import GroupCoordinator
from kmirror.coordinator.group.group import ClassicGroup
from kmirror.coordinator.group.member import Protocol
from kmirror.coordinator.group.state import GroupState
from kmirror.coordinator.offsets import commits
from kmirror.coordinator.offsets.commits import OffsetToCommit
from kmirror.protocol.consumer_protocol import (
    ConsumerSubscription,
    encode_assignment,
    encode_subscription,
)
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.consumer_groups import ConsumerGroups, T

E = ErrorCode


def classic_group(cg: ConsumerGroups, *, cooperative: bool = True, names: tuple[str, ...] = ("c1", "c2", "c3"),
                  instance_ids: bool = False) -> ConsumerGroups:
    for n in names:
        cg.add_classic(n, cooperative=cooperative, instance_id=f"i-{n}" if instance_ids else None)
    cg.settle(8)
    group = cg.core.groups["g"]
    assert group.is_in(GroupState.STABLE) and sorted(cg.owners()) == list(range(6))
    return cg


def commit(cg: ConsumerGroups, member_id: str, generation: int, offset: int = 5) -> ErrorCode:
    rid = cg.h.next_request_id()
    cg.h.run(commits.commit_offsets(cg.core, rid, group_id="g", generation_id=generation, member_id=member_id,
                                    group_instance_id=None, offsets=[OffsetToCommit("t", 0, offset, -1, "")]))
    return cg.h.responses[rid].partitions[0].error  # type: ignore[no-any-return]


def fetched(cg: ConsumerGroups) -> int:
    return commits.fetch_offsets(cg.core, group_id="g", topics=[("t", [0])]).offsets[0].offset


def leave_consumer(cg: ConsumerGroups, name: str) -> None:
    assert cg.send(HeartbeatRequest("g", name, -1)).error == E.none
    del cg.clients[name]


def stop_classic(cg: ConsumerGroups, name: str) -> None:
    cg.classic.pop(name).leave()


def sizes(cg: ConsumerGroups) -> list[int]:
    counts: dict[str, int] = {}
    for owner in cg.owners().values():
        counts[owner] = counts.get(owner, 0) + 1
    return sorted(counts.values())


@pytest.mark.parametrize("cooperative", [True, False], ids=["cooperative", "eager"])
def test_a_rolling_upgrade_then_a_rolling_downgrade_keeps_every_partition_owned_once(cooperative):
    cg = classic_group(ConsumerGroups(), cooperative=cooperative)
    generation = cg.core.groups["g"].generation_id
    assert commit(cg, cg.classic["c1"].member_id, generation, offset=42) == E.none

    for old, new in (("c1", "n1"), ("c2", "n2"), ("c3", "n3")):
        stop_classic(cg, old)
        assert cg.join(new).error == E.none
        cg.settle(10)
        assert "g" in cg.core.consumer_groups
        assert sorted(cg.owners()) == list(range(6)) and sizes(cg) == [2, 2, 2]
    group = cg.core.consumer_groups["g"]
    assert group.classic_members() == [] and str(group.state) == "Stable"
    assert fetched(cg) == 42

    for old, new in (("n1", "d1"), ("n2", "d2"), ("n3", "d3")):
        leave_consumer(cg, old)
        cg.add_classic(new, cooperative=cooperative)
        cg.settle(10)
        assert sorted(cg.owners()) == list(range(6)) and sizes(cg) == [2, 2, 2]
    assert "g" not in cg.core.consumer_groups
    classic = cg.core.groups["g"]
    assert classic.is_in(GroupState.STABLE) and sorted(classic.members) == sorted(
        c.member_id for c in cg.classic.values())
    assert fetched(cg) == 42


def test_the_upgrade_keeps_the_classic_members_and_their_partitions():
    cg = classic_group(ConsumerGroups())
    owned = {c.member_id: set(c.owned) for c in cg.classic.values()}
    generation = cg.core.groups["g"].generation_id
    result = cg.join("n1")
    assert (result.error, result.member_epoch) == (E.none, generation + 1)
    assert "g" not in cg.core.groups
    group = cg.core.consumer_groups["g"]
    for member_id, partitions in owned.items():
        member = group.members[member_id]
        assert member.uses_classic_protocol and member.member_epoch == generation
        assert member.assigned == {T: frozenset(partitions)}
    described = consumer_admin.describe(cg.core, "g")
    assert sorted(m.member_type for m in described.members) == [0, 0, 0, 1]
    # the classic members are asked to rejoin: the group epoch moved past theirs
    c1 = cg.classic["c1"]
    assert cg.core.heartbeat(group_id="g", generation_id=c1.generation, member_id=c1.member_id) == E.rebalance_in_progress
    cg.settle(10)
    assert sizes(cg) == [1, 1, 2, 2]


def test_waiting_classic_joins_are_answered_rebalance_in_progress_by_the_upgrade():
    cg = classic_group(ConsumerGroups())
    c1 = cg.classic["c1"]
    c1.join()  # a rejoin starts a classic rebalance: c1's JoinGroup waits for the others
    assert c1.join_rid not in cg.h.responses
    assert cg.join("n1").error == E.none
    assert cg.h.responses[c1.join_rid].error == E.rebalance_in_progress
    cg.settle(10)
    assert sorted(cg.owners()) == list(range(6))


def test_offset_commits_of_classic_members_carry_their_member_epoch_as_generation():
    cg = classic_group(ConsumerGroups())
    cg.join("n1")
    cg.settle(10)
    c1 = cg.classic["c1"]
    epoch = cg.core.consumer_groups["g"].members[c1.member_id].member_epoch
    assert commit(cg, c1.member_id, epoch) == E.none
    assert commit(cg, c1.member_id, epoch - 1) == E.illegal_generation
    assert commit(cg, "n1", 0) == E.stale_member_epoch


def test_classic_requests_to_a_consumer_group_are_checked_as_kafka_does():
    cg = classic_group(ConsumerGroups())
    cg.join("n1")
    cg.settle(10)
    c1 = cg.classic["c1"]
    core = cg.core
    assert core.heartbeat(group_id="g", generation_id=c1.generation, member_id=c1.member_id) == E.none
    assert core.heartbeat(group_id="g", generation_id=c1.generation + 1, member_id=c1.member_id) == E.illegal_generation
    assert core.heartbeat(group_id="g", generation_id=c1.generation, member_id="nobody") == E.unknown_member_id
    n1_epoch = cg.clients["n1"].epoch
    assert core.heartbeat(group_id="g", generation_id=n1_epoch, member_id="n1") == E.unknown_member_id

    def sync(**kw: object) -> ErrorCode:
        rid = cg.h.next_request_id()
        args = {"group_id": "g", "generation_id": c1.generation, "member_id": c1.member_id,
                "protocol_type": "consumer", "protocol_name": c1.protocol, "assignments": {}}
        cg.h.run(core.sync(rid, **{**args, **kw}))  # type: ignore[arg-type]
        return cg.h.responses[rid].error  # type: ignore[no-any-return]

    assert sync() == E.none
    assert sync(protocol_name="range") == E.inconsistent_group_protocol
    assert sync(generation_id=c1.generation - 1) == E.illegal_generation

    def join(protocol_type: str, protocols: tuple[str, ...]) -> ErrorCode:
        rid = cg.h.join(group="g", protocol_type=protocol_type, protocols=protocols, require_known=False,
                        metadata=encode_subscription(ConsumerSubscription(1, ("t",))))
        return cg.h.responses[rid].error  # type: ignore[no-any-return]

    assert join("connect", ("cooperative-sticky",)) == E.inconsistent_group_protocol
    assert join("consumer", ("range",)) == E.inconsistent_group_protocol  # the classic members offer another
    assert join("consumer", ("range", "cooperative-sticky")) == E.none


def test_a_classic_member_in_a_consumer_group_is_answered_at_once_and_synced_with_its_partitions():
    cg = ConsumerGroups()
    cg.join("n1")
    c1 = cg.add_classic("c1")
    cg.poll_classic("c1")  # MEMBER_ID_REQUIRED: it joins again with its id
    cg.poll_classic("c1")  # answered at once (no join barrier): it syncs
    assert c1.sync_rid is not None and c1.generation == 2
    cg.settle(8)
    assert sizes(cg) == [3, 3]
    assert set(c1.owned) == set(cg.core.consumer_groups["g"].members[c1.member_id].assigned[T])


def test_the_last_consumer_member_leaving_downgrades_the_group_and_a_rebalance_follows():
    cg = ConsumerGroups()
    cg.join("n1")
    cg.add_classic("c1")
    cg.add_classic("c2")
    cg.settle(8)
    assert commit(cg, "n1", cg.clients["n1"].epoch, offset=7) == E.none
    epoch = cg.core.consumer_groups["g"].group_epoch
    leave_consumer(cg, "n1")
    classic = cg.core.groups["g"]
    assert "g" not in cg.core.consumer_groups
    assert classic.is_in(GroupState.PREPARING_REBALANCE) and classic.generation_id == epoch
    assert classic.protocol_name == "cooperative-sticky"
    assert fetched(cg) == 7
    cg.settle(8)
    assert classic.is_in(GroupState.STABLE) and sorted(cg.owners()) == list(range(6)) and sizes(cg) == [3, 3]


def test_the_last_consumer_member_expiring_downgrades_the_group():
    cg = ConsumerGroups()
    cg.join("n1")
    cg.add_classic("c1", session_ms=60_000)
    cg.settle(6)
    del cg.clients["n1"]  # it stops without leaving; c1 keeps heartbeating
    for _ in range(5):
        cg.h.advance(10_000)
        cg.poll_classic("c1")
    assert "g" in cg.core.groups and "g" not in cg.core.consumer_groups
    cg.settle(6)
    assert cg.core.groups["g"].is_in(GroupState.STABLE) and cg.owners() == dict.fromkeys(range(6), "c1")


def test_classic_members_that_do_not_rejoin_or_sync_in_time_are_fenced():
    cg = ConsumerGroups()
    cg.join("n1")
    c1 = cg.add_classic("c1", rebalance_ms=20_000, session_ms=60_000)
    cg.settle(6)
    # it joins but never syncs: fenced after its rebalance timeout
    c1.join()
    group = cg.core.consumer_groups["g"]
    cg.h.advance(19_999)
    assert c1.member_id in group.members
    cg.h.advance(1)
    assert c1.member_id not in group.members
    # a new member of the consumer protocol bumps the epoch: a classic member told to rejoin
    # that does not is fenced after its rebalance timeout too
    del cg.classic["c1"]
    c2 = cg.add_classic("c2", rebalance_ms=20_000, session_ms=60_000)
    cg.settle(6)
    cg.join("n2")
    assert cg.core.heartbeat(group_id="g", generation_id=c2.generation, member_id=c2.member_id) == E.rebalance_in_progress
    cg.h.advance(19_999)
    assert c2.member_id in group.members
    cg.h.advance(1)
    assert c2.member_id not in group.members


def test_policies_refuse_the_directions_they_do_not_allow():
    cg = classic_group(ConsumerGroups(group_consumer_migration_policy="downgrade"))
    result = cg.join("n1")
    assert result.error == E.group_id_not_found
    assert result.error_message == "Cannot upgrade classic group g to consumer group because online upgrade is disabled."
    assert "g" in cg.core.groups

    cg = ConsumerGroups(group_consumer_migration_policy="upgrade")
    cg.join("n1")
    cg.add_classic("c1")
    cg.settle(6)
    leave_consumer(cg, "n1")
    group = cg.core.consumer_groups["g"]  # stays a consumer group, of classic members
    cg.settle(6)
    assert [m.uses_classic_protocol for m in group.members.values()] == [True]
    assert cg.owners() == dict.fromkeys(range(6), "c1")


def test_a_classic_group_that_cannot_be_read_as_the_consumer_protocol_is_not_upgraded():
    cg = ConsumerGroups()
    cg.h.new_member(group="connect", protocol_type="connect")
    result = cg.join("n1", group="connect")
    assert (result.error, result.error_message) == (
        E.group_id_not_found,
        "Cannot upgrade classic group connect to consumer group because the group does not use the consumer "
        "embedded protocol.")
    cg.h.new_member(group="garbled", metadata=b"\x00")
    assert cg.join("n1", group="garbled").error_message == (
        "Cannot upgrade classic group garbled to consumer group because the embedded consumer protocol is malformed.")


def test_a_custom_assignors_user_data_refuses_the_upgrade():
    cg = ConsumerGroups()
    sub = encode_subscription(ConsumerSubscription(1, ("t",)))
    member_id = cg.h.new_member(group="g", metadata=sub, protocols=("custom",))
    generation = cg.h.responses[cg.h.pending].generation_id
    assignment = encode_assignment({"t": range(6)}, 1)[:-4] + b"\x00\x00\x00\x02hi"  # UserData: "hi"
    cg.h.sync(member_id, generation, {member_id: assignment})
    result = cg.join("n1")
    assert result.error == E.group_id_not_found
    assert "an unsupported custom assignor is in use" in (result.error_message or "")
    assert isinstance(cg.core.groups["g"], ClassicGroup)


def test_static_members_migrate_each_way_keeping_their_partitions_and_the_others_theirs():
    cg = classic_group(ConsumerGroups(), cooperative=False, instance_ids=True)
    before = {c.instance_id: set(c.owned) for c in cg.classic.values()}
    # i-c1 restarts with the consumer protocol: it takes its classic instance's place
    cg.classic.pop("c1")
    result = cg.join("n1", instance_id="i-c1")
    assert result.error == E.none and result.assignment == {T: frozenset(before["i-c1"])}
    group = cg.core.consumer_groups["g"]
    for name in ("c2", "c3"):  # no epoch moved past the eager classic members: they keep theirs
        c = cg.classic[name]
        assert cg.core.heartbeat(group_id="g", generation_id=c.generation, member_id=c.member_id,
                                 group_instance_id=c.instance_id) == E.none
    cg.settle(6)
    assert {c.instance_id: set(c.owned) for c in cg.classic.values()} == {"i-c2": before["i-c2"],
                                                                          "i-c3": before["i-c3"]}
    assert cg.classic["c2"].errors == [] and cg.classic["c3"].errors == []

    # and back: the consumer member restarts as a classic one, the last of its protocol
    del cg.clients["n1"]
    cg.add_classic("c1-again", cooperative=False, instance_id="i-c1")
    assert "g" not in cg.core.consumer_groups
    classic = cg.core.groups["g"]
    assert classic.is_in(GroupState.STABLE) and classic.generation_id == group.group_epoch
    cg.settle(6)
    assert cg.classic["c1-again"].owned == before["i-c1"]
    assert cg.classic["c2"].errors == [] and cg.classic["c3"].errors == []


def test_a_mixed_group_is_rebuilt_by_a_load_with_its_classic_members():
    cg = classic_group(ConsumerGroups())
    cg.join("n1")
    cg.settle(10)
    group = cg.core.consumer_groups["g"]
    reloaded = GroupCoordinator(cg.h.config, cg.h.clock, lambda: "x", lambda: cg.topics)
    reloaded.begin_load(0)
    reloaded.complete_load(0, cg.h.log.partitions[0])
    again = reloaded.consumer_groups["g"]
    assert isinstance(again, ConsumerGroup) and "g" not in reloaded.groups
    assert again.members == group.members and again.owners == group.owners
    c1 = cg.classic["c1"]
    assert again.members[c1.member_id].classic == group.members[c1.member_id].classic
    assert reloaded.heartbeat(group_id="g", generation_id=c1.generation, member_id=c1.member_id) == E.none

    # after a downgrade the load finds a classic group with the members
    leave_consumer(cg, "n1")
    reloaded = GroupCoordinator(cg.h.config, cg.h.clock, lambda: "x", lambda: cg.topics)
    reloaded.begin_load(0)
    reloaded.complete_load(0, cg.h.log.partitions[0])
    assert "g" not in reloaded.consumer_groups
    assert sorted(reloaded.groups["g"].members) == sorted(cg.core.groups["g"].members)


def test_a_classic_member_joining_with_owned_partitions_revokes_before_others_get_them():
    cg = ConsumerGroups()
    c1 = cg.add_classic("c1")
    cg.settle(6)
    assert c1.owned == set(range(6))
    cg.join("n1")  # the group is upgraded; n1 waits for partitions c1 owns
    assert cg.clients["n1"].owned == {}
    cg.settle(10)
    assert sizes(cg) == [3, 3]


def test_protocol_metadata_of_classic_members_is_stored_and_offered_back_on_downgrade():
    cg = ConsumerGroups()
    cg.join("n1")
    sub = encode_subscription(ConsumerSubscription(3, ("t",), None, (), -1, "rack-a"))
    rid = cg.h.join(group="g", protocols=("cooperative-sticky", "range"), metadata=sub, require_known=False)
    member_id = cg.h.responses[rid].member_id
    member = cg.core.consumer_groups["g"].members[member_id]
    assert member.rack_id == "rack-a"
    assert member.classic is not None and member.classic.supported_protocols == (
        Protocol("cooperative-sticky", sub), Protocol("range", sub))
    leave_consumer(cg, "n1")
    classic = cg.core.groups["g"]
    assert classic.members[member_id].protocols == member.classic.supported_protocols


def test_an_eager_member_that_revoked_everything_moves_to_the_new_epoch_in_one_join():
    cg = ConsumerGroups()
    cg.join("n1")
    c1 = cg.add_classic("c1", cooperative=False)
    cg.settle(6)
    assert len(c1.owned) == 3
    cg.join("n2")  # the target moves one of c1's partitions to n2
    group = cg.core.consumer_groups["g"]
    assert cg.core.heartbeat(group_id="g", generation_id=c1.generation, member_id=c1.member_id) == E.rebalance_in_progress
    c1.join()  # it revoked all first: owning nothing, it need not be asked to revoke
    cg.poll_classic("c1")
    assert c1.generation == group.assignment_epoch
    cg.settle(6)
    assert sizes(cg) == [2, 2, 2]


def test_an_instance_without_its_member_is_an_unknown_member_not_an_internal_error() -> None:
    """A frame fuzzer's Heartbeat naming an instance whose member is gone raised KeyError in
    the handler; Kafka answers UNKNOWN_MEMBER_ID (`staticMember` finds no member)."""
    from kmirror.coordinator.consumer_group.classic_members import validate_member
    from kmirror.protocol.errors import ErrorCode

    group = ConsumerGroup("g", static_members={"instance": "gone"})
    assert validate_member(group, "gone", "instance") == ErrorCode.unknown_member_id
    assert validate_member(group, "other", "instance") == ErrorCode.fenced_instance_id
