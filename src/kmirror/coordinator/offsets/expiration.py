"""Committed-offset expiration (KIP-211 as Kafka 4's group coordinator runs it:
`GroupCoordinatorShard.cleanupGroupMetadata`, `OffsetMetadataManager.cleanupExpiredOffsets`,
`GroupMetadataManager.maybeDeleteGroup`).

Every `offsets.retention.check.interval.ms` after a `__consumer_offsets` partition is loaded,
and after each check, every group of that partition is checked:

1. its offsets that the group's `ExpirationCondition` expires, and that no transaction still
   holds pending, are tombstoned and leave the group at once;
2. when none is left (and no transactional commit of the group is pending), the group is
   deleted if it is empty: its group metadata tombstones follow.

The condition (Kafka `Group.offsetExpirationCondition`, `isSubscribedToTopic`):

| group | retention counts from | offsets that never expire |
|---|---|---|
| classic, no protocol type (commits only) | each offset's commit | - |
| classic, Empty | when it became Empty (else each commit) | - |
| classic `consumer`, Stable, subscriptions readable | each offset's commit | subscribed topics' |
| classic, any other state | nothing expires | every one |
| consumer group (KIP-848) | each offset's commit | subscribed topics' |

An offset expires once `now - base >= offsets.retention.minutes`, or, when its commit named
a retention time (OffsetCommit v2-v4), once `now >= its expire timestamp`.

The records leave memory before they are appended, as DeleteGroups' do; a failed append is
not undone (the partition is then usually moving away, and a load rebuilds from the log).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kmirror.coordinator.config import CoordinatorConfig
from kmirror.coordinator.consumer_group import records as consumer_records
from kmirror.coordinator.consumer_group.group import ConsumerGroup
from kmirror.coordinator.consumer_group.ports import TopicsView
from kmirror.coordinator.consumer_group.target import subscribed_topic_names
from kmirror.coordinator.group.group import ClassicGroup, OffsetAndMetadata
from kmirror.coordinator.group.sensors import GroupCoordinatorSensors, GroupSensor
from kmirror.coordinator.group.state import GroupState
from kmirror.coordinator.offsets import replay
from kmirror.coordinator.results import GroupOutput
from kmirror.coordinator.share_group.state_records import ShareSnapshot, ShareStateKey
from kmirror.ports import Clock
from kmirror.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolError,
    decode_subscription,
)
from kmirror.protocol.errors import ErrorCode
from kmirror.types import TopicPartition

# Records per append: a check that expires many groups writes several batches, each far
# below `__consumer_offsets`' message size limit; a group's records stay in one batch.
MAX_RECORDS_PER_APPEND = 1000

Records = list[tuple[bytes, bytes | None]]


class ExpiringState(Protocol):
    groups: dict[str, ClassicGroup]
    consumer_groups: dict[str, ConsumerGroup]
    pending_txn_offsets: dict[str, dict[int, dict[TopicPartition, OffsetAndMetadata]]]
    # partition -> monotonic deadline of its next check
    offsets_expiration_deadline_ms: dict[int, int]
    share_states: dict[ShareStateKey, ShareSnapshot]


class ExpiringCore(Protocol):
    """What expiration needs of the group coordinator core."""

    config: CoordinatorConfig
    clock: Clock
    sensors: GroupCoordinatorSensors

    @property
    def state(self) -> ExpiringState: ...

    def partition_for(self, group_id: str) -> int: ...

    def topics(self) -> TopicsView: ...

    def append_to_partition(self, partition: int, records: Records, on_success: Callable[[], GroupOutput],
                            on_failure: Callable[[ErrorCode], GroupOutput]) -> GroupOutput: ...


@dataclass(frozen=True, slots=True)
class ExpirationCondition:
    """Kafka `OffsetExpirationConditionImpl` with the group's subscribed topics."""

    # retention counts from here for every offset (an Empty classic group's state timestamp);
    # None: from each offset's commit timestamp
    base_timestamp_ms: int | None
    subscribed_topics: frozenset[str] = frozenset()

    def is_offset_expired(self, offset: OffsetAndMetadata, now_ms: int, retention_ms: int) -> bool:
        if offset.expire_timestamp_ms is not None:
            return now_ms >= offset.expire_timestamp_ms
        base = offset.commit_timestamp_ms if self.base_timestamp_ms is None else self.base_timestamp_ms
        return now_ms - base >= retention_ms


def classic_condition(group: ClassicGroup) -> ExpirationCondition | None:
    """Kafka `ClassicGroup.offsetExpirationCondition`; None: no offset of the group expires now."""
    if not group.protocol_type:
        return ExpirationCondition(None)
    if group.is_in(GroupState.EMPTY):
        return ExpirationCondition(group.state_timestamp_ms if group.state_timestamp_ms >= 0 else None)
    if group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.is_in(GroupState.STABLE):
        subscribed = classic_subscribed_topics(group)
        if subscribed is not None:
            return ExpirationCondition(None, subscribed)
    return None


def classic_subscribed_topics(group: ClassicGroup) -> frozenset[str] | None:
    """Kafka `ClassicGroup.computeSubscribedTopics` for a group with members: the topics of every
    member's `consumer` subscription; None when one cannot be read (the group's subscriptions
    are then unknown and none of its offsets expire)."""
    if group.protocol_name is None:
        return None
    topics: set[str] = set()
    for member in group.members.values():
        try:
            topics.update(decode_subscription(member.metadata_for(group.protocol_name)).topics)
        except ConsumerProtocolError:
            return None
    return frozenset(topics)


def consumer_condition(group: ConsumerGroup, topics: TopicsView) -> ExpirationCondition:
    """Kafka `ConsumerGroup.offsetExpirationCondition` and `isSubscribedToTopic`."""
    return ExpirationCondition(None, subscribed_topic_names(group, topics))


def cleanup_expired_offsets(core: ExpiringCore, group_id: str, offsets: dict[TopicPartition, OffsetAndMetadata],
                            condition: ExpirationCondition | None, records: Records) -> bool:
    """Remove the group's expired `offsets` and add their tombstones to `records`. True when
    no offset is left and no transactional commit of the group is pending."""
    pending = {tp for by_producer in core.state.pending_txn_offsets.get(group_id, {}).values() for tp in by_producer}
    if not offsets:
        return not pending
    if condition is None:
        return False
    now_ms = core.clock.now_ms()
    retention_ms = core.config.offsets_retention_ms
    all_expired = True
    expired = 0
    for tp in sorted(offsets):
        if (tp.topic in condition.subscribed_topics or tp in pending
                or not condition.is_offset_expired(offsets[tp], now_ms, retention_ms)):
            all_expired = False
            continue
        del offsets[tp]
        records.append(replay.offset_commit_record(group_id, tp, None))
        expired += 1
    core.sensors.record(GroupSensor.OFFSET_EXPIRED, expired)
    return all_expired and not pending


def maybe_delete_group(core: ExpiringCore, group_id: str, records: Records) -> None:
    """Kafka `GroupMetadataManager.maybeDeleteGroup`: an empty group goes, with its tombstones."""
    consumer_group = core.state.consumer_groups.get(group_id)
    if consumer_group is not None:
        if consumer_group.is_empty:
            records.extend(consumer_records.group_tombstones(group_id))
            del core.state.consumer_groups[group_id]
        return
    group = core.state.groups.get(group_id)
    if group is not None and group.is_in(GroupState.EMPTY):
        records.append(replay.group_tombstone(group_id))
        group.transition_to(GroupState.DEAD, core.clock.now_ms())
        del core.state.groups[group_id]


def cleanup_group_metadata(core: ExpiringCore, partition: int) -> GroupOutput:
    """One check of every group of `partition`: the appends of its tombstones."""
    topics = core.topics()
    by_group: list[Records] = []
    for group_id in sorted(_group_ids(core, partition)):
        records: Records = []
        consumer_group = core.state.consumer_groups.get(group_id)
        if consumer_group is not None:
            all_gone = cleanup_expired_offsets(core, group_id, consumer_group.offsets,
                                               consumer_condition(consumer_group, topics), records)
        else:
            group = core.state.groups[group_id]
            all_gone = cleanup_expired_offsets(core, group_id, group.offsets, classic_condition(group), records)
        if all_gone:
            maybe_delete_group(core, group_id, records)
        if records:
            by_group.append(records)
    out = GroupOutput()
    for batch in _batches(by_group):
        out.extend(core.append_to_partition(partition, batch, GroupOutput, lambda _e: GroupOutput()))
    return out


def poll(core: ExpiringCore, now_ms: int) -> GroupOutput:
    """Check the partitions whose deadline has come (monotonic `now_ms`) and set their next."""
    out = GroupOutput()
    deadlines = core.state.offsets_expiration_deadline_ms
    for partition in sorted(p for p, deadline in deadlines.items() if deadline <= now_ms):
        deadlines[partition] = now_ms + core.config.offsets_retention_check_interval_ms
        out.extend(cleanup_group_metadata(core, partition))
    return out


def _group_ids(core: ExpiringCore, partition: int) -> list[str]:
    groups: Mapping[str, object] = {**core.state.groups, **core.state.consumer_groups}
    return [g for g in groups if core.partition_for(g) == partition]


def _batches(by_group: list[Records]) -> list[Records]:
    batches: list[Records] = []
    for records in by_group:
        if batches and len(batches[-1]) + len(records) <= MAX_RECORDS_PER_APPEND:
            batches[-1].extend(records)
        else:
            batches.append(list(records))
    return batches
