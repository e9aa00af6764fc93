"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets on the core,
and the mirror's choice of what to alter."""

from __future__ import annotations

import uuid

from kmirror.coordinator.consumer_group.heartbeat import heartbeat as consumer_heartbeat
from kmirror.coordinator.consumer_group.messages import HeartbeatRequest
from kmirror.coordinator.consumer_group.ports import TopicInfo
from kmirror.coordinator.share_group import offsets, state_store
from kmirror.coordinator.share_group.heartbeat import ShareHeartbeatRequest, heartbeat
from kmirror.coordinator.share_group.offsets import PartitionOffset, ShareOffsetsResult
from kmirror.coordinator.share_group.state_records import ShareSnapshot, ShareStateKey
from kmirror.mirror.metadata_sync.share_groups import share_offsets_to_alter
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.groups import CoreHarness
from kmirror.types import TopicPartition

T = uuid.UUID(int=7)


def harness() -> CoreHarness:
    h = CoreHarness()
    h.topics["t"] = TopicInfo(T, 2)
    return h


def alter(h: CoreHarness, group: str, changes: list[tuple[str, int, int]]) -> ShareOffsetsResult:
    rid = h.next_request_id()
    h.run(offsets.alter(h.core, rid, group, changes))
    result = h.responses[rid]
    assert isinstance(result, ShareOffsetsResult)
    return result


def test_altering_creates_the_group_and_describing_reads_it_back() -> None:
    h = harness()
    assert offsets.describe(h.core, "sg", None).error == ErrorCode.group_id_not_found
    result = alter(h, "sg", [("t", 0, 42), ("nope", 0, 1), ("t", 5, 1)])
    assert [p.error for p in result.partitions] == [ErrorCode.none, ErrorCode.unknown_topic_or_partition,
                                                    ErrorCode.unknown_topic_or_partition]
    assert "sg" in h.core.share_groups
    assert offsets.describe(h.core, "sg", None).partitions == (PartitionOffset("t", T, 0, 42, -1),)
    named = offsets.describe(h.core, "sg", [("t", [0, 1])]).partitions
    assert [(p.partition, p.start_offset) for p in named] == [(0, 42), (1, -1)]


def test_altering_moves_the_state_epoch_which_fences_the_leaders_older_state() -> None:
    h = harness()
    key = ShareStateKey("sg", T, 0)
    rid = h.next_request_id()
    h.run(state_store.write(h.core, rid, key, ShareSnapshot(0, 3, 10, ((10, 12, 1, 1),))))
    alter(h, "sg", [("t", 0, 5)])
    assert h.core.share_states[key] == ShareSnapshot(1, 3, 5)
    rid = h.next_request_id()
    h.run(state_store.write(h.core, rid, key, ShareSnapshot(0, 3, 13)))
    assert h.responses[rid].error == ErrorCode.fenced_state_epoch


def test_a_group_with_members_or_of_another_kind_is_refused() -> None:
    h = harness()
    h.run(heartbeat(h.core, 90, ShareHeartbeatRequest("sg", "m", 0, subscribed_topic_names=("t",)), h.topics))
    assert alter(h, "sg", [("t", 0, 1)]).error == ErrorCode.non_empty_group
    rid = h.next_request_id()
    h.run(consumer_heartbeat(h.core, rid, HeartbeatRequest("cg", "c", 0, rebalance_timeout_ms=1000,
                                                           subscribed_topic_names=("t",), owned={}), h.topics))
    assert alter(h, "cg", [("t", 0, 1)]).error == ErrorCode.group_id_not_found
    assert offsets.describe(h.core, "cg", None).error == ErrorCode.group_id_not_found


def test_deleting_offsets_forgets_a_topics_states() -> None:
    h = harness()
    alter(h, "sg", [("t", 0, 1), ("t", 1, 2)])
    rid = h.next_request_id()
    h.run(offsets.delete(h.core, rid, "sg", ["t"]))
    assert h.responses[rid].error == ErrorCode.none
    assert offsets.describe(h.core, "sg", None).partitions == ()


def test_the_mirror_alters_only_active_partitions_that_differ() -> None:
    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    source = {a0: 10, a1: 4, b0: 7, TopicPartition("a", 2): 3}
    assert share_offsets_to_alter(source, {a1: 4}, {"a": 2}) == {a0: 10}
    assert share_offsets_to_alter({a0: -1}, {}, {"a": 1}) == {}
