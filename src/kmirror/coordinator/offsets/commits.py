"""OffsetCommit, OffsetFetch and OffsetDelete against the coordinator core's groups
(Kafka `OffsetMetadataManager` for classic groups).

Committed offsets enter a group's cache only once their records are appended: the
response to a commit is produced by the append's completion.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kmirror.coordinator.consumer_group import admin as consumer_admin
from kmirror.coordinator.consumer_group.group import ConsumerGroup
from kmirror.coordinator.group.coordinator import GroupCoordinator
from kmirror.coordinator.group.group import ClassicGroup, OffsetAndMetadata
from kmirror.coordinator.group.sensors import GroupSensor
from kmirror.coordinator.group.state import GroupState
from kmirror.coordinator.group.static_members import validate_member
from kmirror.coordinator.offsets import replay
from kmirror.coordinator.results import (
    CommitResult,
    FetchedOffset,
    FetchOffsetsResult,
    GroupOutput,
    OffsetDeleteResult,
    PartitionResult,
)
from kmirror.protocol.errors import ErrorCode
from kmirror.types import TopicPartition

E = ErrorCode
DEFAULT_RETENTION_TIME_MS = -1  # Kafka `OffsetCommitRequest.DEFAULT_RETENTION_TIME`


@dataclass(frozen=True, slots=True)
class OffsetToCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


def validate_offset_commit(
    group: ClassicGroup, generation_id: int, member_id: str, group_instance_id: str | None
) -> ErrorCode:
    """Kafka `ClassicGroup.validateOffsetCommit`."""
    if group.is_in(GroupState.DEAD):
        return E.coordinator_not_available
    if generation_id < 0 and group.is_in(GroupState.EMPTY):
        return E.none  # a consumer not using group management (or the admin client)
    if generation_id >= 0 or member_id or group_instance_id is not None:
        member_error = validate_member(group, member_id, group_instance_id)
        if member_error != E.none:
            return member_error
        if generation_id != group.generation_id:
            return E.illegal_generation
    elif not group.is_in(GroupState.EMPTY):
        return E.unknown_member_id
    if group.is_in(GroupState.COMPLETING_REBALANCE):
        return E.rebalance_in_progress
    return E.none


def commit_offsets(
    core: GroupCoordinator,
    request_id: int,
    *,
    group_id: str,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
    offsets: list[OffsetToCommit],
    retention_time_ms: int = DEFAULT_RETENTION_TIME_MS,
) -> GroupOutput:
    """`retention_time_ms`: OffsetCommit v2-v4's RetentionTimeMs; other than -1 (the broker's
    `offsets.retention.minutes`) the offsets expire that long after the commit (Kafka
    `OffsetMetadataManager.expireTimestampMs`)."""

    def reply_all(error: ErrorCode) -> GroupOutput:
        return GroupOutput(responses=[(request_id, CommitResult(tuple(PartitionResult(o.topic, o.partition, error) for o in offsets)))])

    err = core.coordinator_error(group_id)
    if err is not None:
        return reply_all(err)
    consumer_group = core.consumer_groups.get(group_id)
    if consumer_group is not None:
        # a consumer group's members commit with their member epoch (KIP-848)
        err = consumer_admin.validate_offset_commit(consumer_group, member_id, generation_id)
        if err != E.none:
            return reply_all(err)
    else:
        group = core.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return reply_all(E.illegal_generation)
            group = ClassicGroup(group_id, state_timestamp_ms=core.clock.now_ms())
            core.groups[group_id] = group
        err = validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if err != E.none:
            return reply_all(err)
        member = group.members.get(member_id)
        if member is not None:
            group.heartbeat_deadline_ms[member_id] = core.clock.monotonic_ms() + member.session_timeout_ms

    now_wall = core.clock.now_ms()
    expire_timestamp_ms = None if retention_time_ms == DEFAULT_RETENTION_TIME_MS else now_wall + retention_time_ms
    accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
    errors: dict[tuple[str, int], ErrorCode] = {}
    for o in offsets:
        metadata = o.metadata or ""
        if len(metadata.encode()) > core.config.offset_metadata_max_bytes:
            errors[(o.topic, o.partition)] = E.offset_metadata_too_large
        else:
            accepted[(o.topic, o.partition)] = OffsetAndMetadata(o.offset, o.leader_epoch, metadata, now_wall,
                                                                 expire_timestamp_ms)

    def result(error_for_accepted: ErrorCode) -> GroupOutput:
        parts = tuple(
            PartitionResult(o.topic, o.partition, errors.get((o.topic, o.partition), error_for_accepted))
            for o in offsets
        )
        return GroupOutput(responses=[(request_id, CommitResult(parts))])

    if not accepted:
        return result(E.none)

    def persisted() -> GroupOutput:
        target = core.consumer_groups.get(group_id) or core.groups.get(group_id)
        if target is not None:
            for (topic, partition), value in accepted.items():
                target.offsets[_tp(topic, partition)] = value
        return result(E.none)

    def failed(error: ErrorCode) -> GroupOutput:
        return result(_append_error(error))

    records = [replay.offset_commit_record(group_id, _tp(t, p), v) for (t, p), v in accepted.items()]
    core.sensors.record(GroupSensor.OFFSET_COMMITS, len(records))
    return core.append(group_id, records, persisted, failed)


def _append_error(error: ErrorCode) -> ErrorCode:
    """Kafka maps append failures of coordinator records to what clients retry on."""
    if error in (E.not_leader_or_follower, E.not_coordinator):
        return E.not_coordinator
    if error in (E.message_too_large, E.record_list_too_large, E.invalid_fetch_size):
        return E.invalid_commit_offset_size
    return E.coordinator_not_available


def _tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


def fetch_offsets(
    core: GroupCoordinator, *, group_id: str, topics: list[tuple[str, list[int]]] | None,
    member_id: str | None = None, member_epoch: int = -1,
) -> FetchOffsetsResult:
    """OffsetFetch for one group; `topics=None` means every committed offset. Partitions
    without a commit answer offset -1 and no error, as Kafka does. A consumer group's
    member fetching (v9) is checked against its member epoch."""
    err = core.coordinator_error(group_id)
    if err is not None:
        return FetchOffsetsResult(group_id, err)
    consumer_group = core.consumer_groups.get(group_id)
    if consumer_group is not None:
        err = consumer_admin.validate_offset_fetch(consumer_group, member_id, member_epoch)
        if err != E.none:
            return FetchOffsetsResult(group_id, err)
    group = core.consumer_groups.get(group_id) or core.groups.get(group_id)
    committed = group.offsets if group is not None else {}
    out: list[FetchedOffset] = []
    if topics is None:
        for tp, v in sorted(committed.items()):
            out.append(FetchedOffset(tp.topic, tp.partition, v.offset, v.leader_epoch, v.metadata, E.none))
    else:
        for topic, partitions in topics:
            for p in partitions:
                found = committed.get(_tp(topic, p))
                if found is None:
                    out.append(FetchedOffset(topic, p, -1, -1, "", E.none))
                else:
                    out.append(FetchedOffset(topic, p, found.offset, found.leader_epoch, found.metadata, E.none))
    return FetchOffsetsResult(group_id, E.none, tuple(out))


def delete_offsets(
    core: GroupCoordinator,
    request_id: int,
    *,
    group_id: str,
    partitions: list[tuple[str, int]],
    subscribed_topics: set[str] | None,
) -> GroupOutput:
    """OffsetDelete (KIP-496): allowed for an Empty group, or for topics a consumer-protocol
    group is not subscribed to (`subscribed_topics`, parsed from the members' metadata by the
    caller; None when the protocol is not `consumer`)."""

    def reply(result: OffsetDeleteResult) -> GroupOutput:
        return GroupOutput(responses=[(request_id, result)])

    err = core.coordinator_error(group_id)
    if err is not None:
        return reply(OffsetDeleteResult(err))
    consumer_group = core.consumer_groups.get(group_id)
    if consumer_group is not None:
        return _delete_consumer_group_offsets(core, consumer_group, partitions, reply)
    group = core.groups.get(group_id)
    if group is None or group.is_in(GroupState.DEAD):
        return reply(OffsetDeleteResult(E.group_id_not_found))
    if not group.is_in(GroupState.EMPTY) and subscribed_topics is None:
        return reply(OffsetDeleteResult(E.non_empty_group))
    results = []
    records = []
    for topic, p in partitions:
        if not group.is_in(GroupState.EMPTY) and subscribed_topics is not None and topic in subscribed_topics:
            results.append(PartitionResult(topic, p, E.group_subscribed_to_topic))
            continue
        results.append(PartitionResult(topic, p, E.none))
        if _remove_offset(core, group, _tp(topic, p)):
            records.append(replay.offset_commit_record(group_id, _tp(topic, p), None))
    core.sensors.record(GroupSensor.OFFSET_DELETIONS, len(records))
    done = OffsetDeleteResult(E.none, tuple(results))
    if not records:
        return reply(done)
    return core.append(group_id, records, lambda: reply(done), lambda e: reply(OffsetDeleteResult(_append_error(e))))


def _delete_consumer_group_offsets(
    core: GroupCoordinator,
    group: ConsumerGroup,
    partitions: list[tuple[str, int]],
    reply: Callable[[OffsetDeleteResult], GroupOutput],
) -> GroupOutput:
    """OffsetDelete on a consumer group: refused for topics its members subscribe to."""
    subscribed = group.subscribed_topic_names()
    results, records = [], []
    for topic, p in partitions:
        if topic in subscribed:
            results.append(PartitionResult(topic, p, E.group_subscribed_to_topic))
            continue
        results.append(PartitionResult(topic, p, E.none))
        if _remove_offset(core, group, _tp(topic, p)):
            records.append(replay.offset_commit_record(group.group_id, _tp(topic, p), None))
    core.sensors.record(GroupSensor.OFFSET_DELETIONS, len(records))
    done = OffsetDeleteResult(E.none, tuple(results))
    if not records:
        return reply(done)
    return core.append(group.group_id, records, lambda: reply(done),
                       lambda e: reply(OffsetDeleteResult(_append_error(e))))


def _remove_offset(core: GroupCoordinator, group: ClassicGroup | ConsumerGroup, tp: TopicPartition) -> bool:
    """The offset leaves the group, and the commits of its open transactions: a tombstone is
    written if either held it (Kafka: `hasCommittedOffset || hasPendingTransactionalOffsets`)."""
    committed = group.offsets.pop(tp, None) is not None
    return replay.remove_pending_transactional_offset(core.state.pending_txn_offsets, group.group_id, tp) or committed
