"""ShareGroupHeartbeat on the group coordinator core: joining, epochs, the simple assignor,
leaving, session expiry and group id conflicts."""

from __future__ import annotations

import uuid

import pytest

from kmirror.coordinator.consumer_group.heartbeat import heartbeat as consumer_heartbeat
from kmirror.coordinator.consumer_group.messages import HeartbeatRequest, HeartbeatResult
from kmirror.coordinator.consumer_group.ports import BROKER_DEFAULTS, GroupConfig, TopicInfo
from kmirror.coordinator.share_group import assignor
from kmirror.coordinator.share_group.admin import describe
from kmirror.coordinator.share_group.group import ShareGroupMember
from kmirror.coordinator.share_group.heartbeat import ShareHeartbeatRequest, heartbeat
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.groups import CoreHarness

T, U = uuid.UUID(int=7), uuid.UUID(int=8)


@pytest.fixture
def h() -> CoreHarness:
    harness = CoreHarness()
    harness.topics["t"] = TopicInfo(T, 4)
    harness.topics["u"] = TopicInfo(U, 1)
    return harness


def beat(h: CoreHarness, member: str, epoch: int, topics: tuple[str, ...] | None = ("t",),
         group: str = "sg", config: GroupConfig = BROKER_DEFAULTS) -> HeartbeatResult:
    rid = h.next_request_id()
    h.run(heartbeat(h.core, rid, ShareHeartbeatRequest(group, member, epoch, subscribed_topic_names=topics),
                    h.topics, config))
    result = h.responses[rid]
    assert isinstance(result, HeartbeatResult)
    return result


def test_a_member_joins_and_gets_every_partition(h: CoreHarness) -> None:
    result = beat(h, "m1", 0)
    assert result.error == ErrorCode.none and result.member_epoch == 1
    assert result.assignment == {T: frozenset({0, 1, 2, 3})}
    assert result.heartbeat_interval_ms == 5000
    again = beat(h, "m1", 1, None)
    assert again.member_epoch == 1 and again.assignment is None  # nothing changed: no assignment sent


def test_a_second_member_splits_the_partitions_and_the_first_learns_it_at_its_next_heartbeat(h: CoreHarness) -> None:
    beat(h, "m1", 0)
    second = beat(h, "m2", 0)
    assert second.member_epoch == 2 and second.assignment == {T: frozenset({1, 3})}
    first = beat(h, "m1", 1, None)
    assert first.member_epoch == 2 and first.assignment == {T: frozenset({0, 2})}


def test_more_members_than_partitions_share_them() -> None:
    members = {f"m{i}": ShareGroupMember(f"m{i}", subscribed_topic_names=("u",)) for i in range(3)}
    assigned = assignor.assign(members, {"u": (U, 1)})
    assert all(a == {U: frozenset({0})} for a in assigned.values())


def test_epochs_are_checked(h: CoreHarness) -> None:
    beat(h, "m1", 0)
    assert beat(h, "m1", 5, None).error == ErrorCode.fenced_member_epoch
    assert beat(h, "nobody", 1, None).error == ErrorCode.unknown_member_id
    assert beat(h, "", 0).error == ErrorCode.invalid_request
    assert beat(h, "m3", 0, ()).error == ErrorCode.invalid_request  # first request without topics
    assert beat(h, "m1", -2, None).error == ErrorCode.invalid_request


def test_a_member_leaving_bumps_the_epoch_and_the_other_gets_everything(h: CoreHarness) -> None:
    beat(h, "m1", 0)
    beat(h, "m2", 0)
    assert beat(h, "m1", 1, None).assignment == {T: frozenset({0, 2})}
    left = beat(h, "m2", -1, None)
    assert left.error == ErrorCode.none and left.member_epoch == -1
    after = beat(h, "m1", 2, None)
    assert after.member_epoch == 3 and after.assignment == {T: frozenset({0, 1, 2, 3})}
    assert beat(h, "m2", -1, None).error == ErrorCode.unknown_member_id


def test_a_silent_member_is_removed_when_its_session_ends(h: CoreHarness) -> None:
    config = GroupConfig(session_timeout_ms=1000)
    beat(h, "m1", 0, config=config)
    beat(h, "m2", 0, config=config)
    assert h.core.next_deadline_ms() is not None
    h.clock.advance(600)
    assert beat(h, "m1", 1, None, config=config).member_epoch == 2
    h.clock.advance(600)
    h.run(h.core.poll(h.clock.monotonic_ms()))
    assert set(h.core.share_groups["sg"].members) == {"m1"}
    assert beat(h, "m1", 2, None, config=config).assignment == {T: frozenset({0, 1, 2, 3})}


def test_a_new_partition_moves_the_group_epoch(h: CoreHarness) -> None:
    beat(h, "m1", 0)
    h.topics["t"] = TopicInfo(T, 5)
    result = beat(h, "m1", 1, None)
    assert result.member_epoch == 2 and result.assignment == {T: frozenset(range(5))}


def test_the_group_size_is_bounded() -> None:
    h = CoreHarness(group_share_max_size=1)
    h.topics["t"] = TopicInfo(T, 1)
    beat(h, "m1", 0)
    assert beat(h, "m2", 0).error == ErrorCode.group_max_size_reached


def test_share_and_consumer_group_ids_do_not_mix(h: CoreHarness) -> None:
    beat(h, "m1", 0, group="sg")
    rid = h.next_request_id()
    h.run(consumer_heartbeat(h.core, rid, HeartbeatRequest("sg", "c1", 0, rebalance_timeout_ms=1000,
                                                           subscribed_topic_names=("t",), owned={}), h.topics))
    assert h.responses[rid].error == ErrorCode.group_id_not_found
    rid = h.next_request_id()
    h.run(consumer_heartbeat(h.core, rid, HeartbeatRequest("cg", "c1", 0, rebalance_timeout_ms=1000,
                                                           subscribed_topic_names=("t",), owned={}), h.topics))
    assert beat(h, "m1", 0, group="cg").error == ErrorCode.group_id_not_found
    assert describe(h.core, "cg").error == ErrorCode.group_id_not_found


def test_described_and_listed(h: CoreHarness) -> None:
    beat(h, "m1", 0)
    described = describe(h.core, "sg")
    assert (described.state, described.group_epoch, described.assignment_epoch, described.assignor_name) == (
        "Stable", 1, 1, "simple")
    assert [m.member_id for m in described.members] == ["m1"]
    from kmirror.coordinator.group.admin import list_groups
    listed = list_groups(h.core, [], ["share"]).groups
    assert [(g.group_id, g.group_type, g.state) for g in listed] == [("sg", "share", "Stable")]
    assert list_groups(h.core, [], ["consumer"]).groups == ()


def test_unloading_the_partition_forgets_the_group(h: CoreHarness) -> None:
    beat(h, "m1", 0)
    h.core.unload(0)
    assert "sg" not in h.core.share_groups


def test_an_empty_share_group_is_deleted_and_one_with_members_is_not(h: CoreHarness) -> None:
    from kmirror.coordinator.group.admin import delete_groups
    beat(h, "m1", 0)
    h.run(delete_groups(h.core, 101, ["sg"]))
    assert h.responses[101].results[0].error == ErrorCode.non_empty_group
    beat(h, "m1", -1, None)
    h.run(delete_groups(h.core, 102, ["sg"]))
    assert h.responses[102].results[0].error == ErrorCode.none and "sg" not in h.core.share_groups


def test_membership_is_stored_and_loaded_again(h: CoreHarness) -> None:
    beat(h, "m1", 0)
    beat(h, "m2", 0)
    beat(h, "m1", 1, None)
    beat(h, "m3", 0)
    beat(h, "m3", -1, None)  # left: not loaded again
    group = h.core.share_groups["sg"]
    epochs = {m: member.member_epoch for m, member in group.members.items()}
    h.core.unload(0)
    h.core.begin_load(0)
    h.core.complete_load(0, h.log.read_all(0))
    loaded = h.core.share_groups["sg"]
    assert loaded.group_epoch == group.group_epoch == 4
    assert {m: member.member_epoch for m, member in loaded.members.items()} == epochs == {"m1": 2, "m2": 2}
    assert loaded.members["m1"].subscribed_topic_names == ("t",)
    # the members go on with their epochs, and get the assignment of the group as it is now
    assert beat(h, "m1", 2, None).assignment == {T: frozenset({0, 2})}
    assert beat(h, "m2", 2, None).member_epoch == 4
    h.clock.advance(h.core.config.group_share_session_timeout_ms)
    h.run(h.core.poll(h.clock.monotonic_ms()))
    assert not h.core.share_groups["sg"].members  # sessions ended: members removed
    h.core.unload(0)
    h.core.begin_load(0)
    h.core.complete_load(0, h.log.read_all(0))
    assert not h.core.share_groups["sg"].members
