"""Classic and consumer groups in one coordinator: ListGroups types, DescribeGroups and
ConsumerGroupDescribe on the other kind, JoinGroup to a consumer group, upgrade and
downgrade of empty groups with their offsets, member-epoch validation of offset commits
(groups with members: test_consumer_group_migration.py)."""

from __future__ import annotations

from kmirror.coordinator.consumer_group import admin as consumer_admin
from kmirror.coordinator.consumer_group.messages import HeartbeatRequest
from kmirror.coordinator.group import admin
from kmirror.coordinator.offsets import commits, txn_commits
from kmirror.coordinator.offsets.commits import OffsetToCommit
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.consumer_groups import ConsumerGroups, T

E = ErrorCode


def commit(cg: ConsumerGroups, member_id: str, epoch: int, offset: int = 5, group: str = "g") -> ErrorCode:
    rid = cg.h.next_request_id()
    cg.h.run(commits.commit_offsets(cg.core, rid, group_id=group, generation_id=epoch, member_id=member_id,
                                    group_instance_id=None, offsets=[OffsetToCommit("t", 0, offset, -1, "")]))
    return cg.h.responses[rid].partitions[0].error  # type: ignore[no-any-return]


def fetched(cg: ConsumerGroups, group: str = "g") -> int:
    return commits.fetch_offsets(cg.core, group_id=group, topics=[("t", [0])]).offsets[0].offset


def test_offset_commits_are_validated_by_member_epoch():
    cg = ConsumerGroups()
    cg.join("a")
    assert commit(cg, "a", 1) == E.none
    assert fetched(cg) == 5
    assert commit(cg, "a", 0) == E.stale_member_epoch
    assert commit(cg, "zz", 1) == E.unknown_member_id
    assert commit(cg, "", -1) == E.unknown_member_id  # an admin commit needs an empty group


def test_list_groups_shows_both_types_and_filters_by_type_and_state():
    cg = ConsumerGroups()
    cg.join("a")
    cg.h.new_member(group="classic")
    listed = admin.list_groups(cg.core, [], [])
    assert {(g.group_id, g.group_type, g.protocol_type) for g in listed.groups} == {
        ("g", "consumer", "consumer"), ("classic", "classic", "consumer")}
    assert [g.group_id for g in admin.list_groups(cg.core, [], ["Consumer"]).groups] == ["g"]
    assert [g.group_id for g in admin.list_groups(cg.core, [], ["classic"]).groups] == ["classic"]
    assert [g.group_id for g in admin.list_groups(cg.core, ["stable"], []).groups] == ["g"]


def test_describe_of_the_other_kind_answers_as_kafka():
    cg = ConsumerGroups()
    cg.join("a")
    cg.h.new_member(group="classic")
    assert admin.describe_group(cg.core, "g", missing_is_error=True).error == E.group_id_not_found
    assert admin.describe_group(cg.core, "g", missing_is_error=False).state == "Dead"
    other = consumer_admin.describe(cg.core, "classic")
    assert (other.error, other.error_message) == (E.group_id_not_found, "Group classic is not a consumer group.")
    described = consumer_admin.describe(cg.core, "g")
    assert (described.state, described.group_epoch, described.assignor_name) == ("Stable", 1, "uniform")
    assert described.members[0].assignment == {T: frozenset(range(6))}


def test_join_group_of_another_protocol_type_to_a_consumer_group_is_inconsistent_group_protocol():
    cg = ConsumerGroups()
    cg.join("a")
    rid = cg.h.join(group="g", require_known=False, protocol_type="connect")
    assert cg.h.responses[rid].error == E.inconsistent_group_protocol
    assert "g" in cg.core.consumer_groups


def test_an_empty_consumer_group_is_downgraded_by_join_group_keeping_its_offsets():
    cg = ConsumerGroups()
    cg.join("a")
    commit(cg, "a", 1, offset=42)
    cg.send(HeartbeatRequest("g", "a", -1))
    cg.h.new_member(group="g")
    assert "g" not in cg.core.consumer_groups
    assert "g" in cg.core.groups
    assert fetched(cg) == 42


def test_an_empty_classic_group_is_upgraded_by_a_heartbeat_keeping_its_offsets():
    cg = ConsumerGroups()
    assert commit(cg, "", -1, offset=17) == E.none  # creates an empty classic group with offsets
    assert "g" in cg.core.groups
    assert cg.join("a").error == E.none
    assert "g" not in cg.core.groups
    assert fetched(cg) == 17


def test_a_classic_group_with_members_is_not_upgraded_when_online_migration_is_disabled():
    cg = ConsumerGroups(group_consumer_migration_policy="disabled")
    cg.h.new_member(group="classic")
    result = cg.join("a", group="classic")
    assert (result.error, result.error_message) == (
        E.group_id_not_found, "Cannot upgrade classic group classic to consumer group because online upgrade is disabled.")
    assert "classic" in cg.core.groups  # online migration: test_consumer_group_migration.py


def test_delete_groups_of_an_empty_consumer_group_removes_it_and_its_offsets():
    cg = ConsumerGroups()
    cg.join("a")
    commit(cg, "a", 1)
    rid = cg.h.next_request_id()
    cg.h.run(admin.delete_groups(cg.core, rid, ["g"]))
    assert cg.h.responses[rid].results[0].error == E.non_empty_group
    cg.send(HeartbeatRequest("g", "a", -1))
    rid = cg.h.next_request_id()
    cg.h.run(admin.delete_groups(cg.core, rid, ["g"]))
    assert cg.h.responses[rid].results[0].error == E.none
    assert "g" not in cg.core.consumer_groups
    assert fetched(cg) == -1


def test_offset_fetch_by_a_member_is_validated_by_member_epoch():
    cg = ConsumerGroups()
    cg.join("a")
    commit(cg, "a", 1, offset=9)

    def fetch(member_id: str | None, epoch: int) -> ErrorCode:
        return commits.fetch_offsets(cg.core, group_id="g", topics=[("t", [0])], member_id=member_id,
                                     member_epoch=epoch).error

    assert fetch("a", 1) == E.none
    assert fetch(None, -1) == E.none  # admin tools name no member
    assert fetch("a", 0) == E.stale_member_epoch
    assert fetch("zz", 1) == E.unknown_member_id


def test_transactional_offsets_of_a_consumer_group_are_checked_and_land_in_it():
    cg = ConsumerGroups()
    cg.join("a")

    def txn_commit(member_id: str, epoch: int) -> ErrorCode:
        rid = cg.h.next_request_id()
        cg.h.run(txn_commits.txn_commit_offsets(
            cg.core, rid, group_id="g", producer_id=7, producer_epoch=0, generation_id=epoch, member_id=member_id,
            group_instance_id=None, offsets=[OffsetToCommit("t", 0, 33, -1, "")]))
        return cg.h.responses[rid].partitions[0].error  # type: ignore[no-any-return]

    assert txn_commit("a", 0) == E.stale_member_epoch
    assert txn_commit("a", 1) == E.none
    txn_commits.replay_end_transaction_marker(cg.core, 0, producer_id=7, committed=True)
    assert "g" not in cg.core.groups
    assert fetched(cg) == 33
