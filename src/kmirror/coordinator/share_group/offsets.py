"""DescribeShareGroupOffsets, AlterShareGroupOffsets and DeleteShareGroupOffsets on the group
coordinator core (Kafka `GroupCoordinatorService.describeShareGroupOffsets`,
`alterShareGroupOffsets`, `deleteShareGroupOffsets`), over the share partition states the
coordinator stores (`state_store`).

A share group's offset is its share partition start offset (SPSO). Altering it is allowed
only while the group has no member (NON_EMPTY_GROUP); it creates the group when it does not
exist (KIP-1279 syncs a mirror's share groups this way) and stores a state with the next
state epoch and no in-flight records, which fences the partition leader's older state: the
leader loads the new one. An id held by a classic or consumer group is GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from kmirror.coordinator.consumer_group.ports import GroupsCore
from kmirror.coordinator.results import GroupOutput
from kmirror.coordinator.share_group import records as share_records
from kmirror.coordinator.share_group import state_records
from kmirror.coordinator.share_group.group import ShareGroup
from kmirror.coordinator.share_group.state_records import ShareSnapshot, ShareStateKey
from kmirror.protocol.errors import ErrorCode

E = ErrorCode
NO_OFFSET = -1


@dataclass(frozen=True, slots=True)
class PartitionOffset:
    topic: str
    topic_id: uuid.UUID | None
    partition: int
    start_offset: int = NO_OFFSET
    leader_epoch: int = -1
    error: ErrorCode = E.none


@dataclass(frozen=True, slots=True)
class ShareOffsetsResult:
    """The group's error, or its partitions' offsets (describe) or errors (alter, delete)."""

    error: ErrorCode
    error_message: str | None = None
    partitions: tuple[PartitionOffset, ...] = field(default_factory=tuple)


def _group_error(core: GroupsCore, group_id: str) -> tuple[ErrorCode, str | None] | None:
    error = core.coordinator_error(group_id)
    if error is not None:
        return error, None
    if group_id in core.groups or group_id in core.consumer_groups:
        return E.group_id_not_found, f"Group {group_id} is not a share group."
    return None


def _change_refused(core: GroupsCore, group_id: str) -> ShareOffsetsResult | None:
    """Why the group's offsets may not change now: not a share group, or it has members."""
    refused = _group_error(core, group_id)
    if refused is not None:
        return ShareOffsetsResult(*refused)
    group = core.share_groups.get(group_id)
    if group is not None and group.members:
        return ShareOffsetsResult(E.non_empty_group, f"Share group {group_id} is not empty.")
    return None


def describe(core: GroupsCore, group_id: str,
             topics: Sequence[tuple[str, Sequence[int]]] | None) -> ShareOffsetsResult:
    """The start offsets of the named partitions (-1 where none is stored; an unknown topic's
    partitions UNKNOWN_TOPIC_OR_PARTITION), or of every partition with a stored state."""
    refused = _group_error(core, group_id)
    if refused is not None:
        return ShareOffsetsResult(*refused)
    stored = {k: s for k, s in core.share_states.items() if k.group_id == group_id}
    if group_id not in core.share_groups and not stored:
        return ShareOffsetsResult(E.group_id_not_found, f"Group {group_id} not found.")
    view = core.topics()
    names = {info.topic_id: name for name, info in view.items()}
    if topics is None:
        wanted = sorted((names[k.topic_id], k.partition) for k in stored if k.topic_id in names)
    else:
        wanted = [(name, p) for name, partitions in topics for p in partitions]
    out = []
    for name, partition in wanted:
        info = view.get(name)
        if info is None:
            out.append(PartitionOffset(name, None, partition, error=E.unknown_topic_or_partition))
            continue
        snapshot = stored.get(ShareStateKey(group_id, info.topic_id, partition))
        out.append(PartitionOffset(name, info.topic_id, partition,
                                   snapshot.start_offset if snapshot else NO_OFFSET,
                                   snapshot.leader_epoch if snapshot else -1))
    return ShareOffsetsResult(E.none, None, tuple(out))


def alter(core: GroupsCore, request_id: int, group_id: str,
          offsets: Sequence[tuple[str, int, int]]) -> GroupOutput:
    """(topic, partition, start offset) each; answered with a `ShareOffsetsResult` once stored."""
    def reply(result: ShareOffsetsResult) -> GroupOutput:
        return GroupOutput(responses=[(request_id, result)])

    refused = _change_refused(core, group_id)
    if refused is not None:
        return reply(refused)
    view = core.topics()
    results: list[PartitionOffset] = []
    records: list[tuple[bytes, bytes | None]] = []
    written: dict[ShareStateKey, ShareSnapshot] = {}
    for name, partition, start_offset in offsets:
        info = view.get(name)
        if info is None or not 0 <= partition < info.partitions:
            results.append(PartitionOffset(name, None if info is None else info.topic_id, partition,
                                           error=E.unknown_topic_or_partition))
            continue
        if start_offset < 0:
            results.append(PartitionOffset(name, info.topic_id, partition, error=E.invalid_request))
            continue
        key = ShareStateKey(group_id, info.topic_id, partition)
        stored = core.share_states.get(key)
        snapshot = ShareSnapshot(stored.state_epoch + 1 if stored else 0, stored.leader_epoch if stored else -1,
                                 start_offset)
        written[key] = snapshot
        records.append((state_records.encode_key(key), state_records.encode_value(snapshot)))
        results.append(PartitionOffset(name, info.topic_id, partition, start_offset))
    if group_id not in core.share_groups:
        core.share_groups[group_id] = group = ShareGroup(group_id)
        records.append(share_records.group_record(group))
    if not records:
        return reply(ShareOffsetsResult(E.none, None, tuple(results)))

    def stored_now() -> GroupOutput:
        core.share_states.update(written)
        return reply(ShareOffsetsResult(E.none, None, tuple(results)))

    return core.append(group_id, records, stored_now, lambda e: reply(ShareOffsetsResult(e)))


def delete(core: GroupsCore, request_id: int, group_id: str, topics: Sequence[str]) -> GroupOutput:
    """Forget the group's stored start offsets of `topics` (an empty group only)."""
    def reply(result: ShareOffsetsResult) -> GroupOutput:
        return GroupOutput(responses=[(request_id, result)])

    refused = _change_refused(core, group_id)
    if refused is not None:
        return reply(refused)
    view = core.topics()
    results, keys = [], []
    for name in topics:
        info = view.get(name)
        if info is None:
            results.append(PartitionOffset(name, None, -1, error=E.unknown_topic_or_partition))
            continue
        keys += [k for k in core.share_states if k.group_id == group_id and k.topic_id == info.topic_id]
        results.append(PartitionOffset(name, info.topic_id, -1))
    if not keys:
        return reply(ShareOffsetsResult(E.none, None, tuple(results)))

    def deleted() -> GroupOutput:
        for key in keys:
            core.share_states.pop(key, None)
        return reply(ShareOffsetsResult(E.none, None, tuple(results)))

    return core.append(group_id, [(state_records.encode_key(k), None) for k in keys], deleted,
                       lambda e: reply(ShareOffsetsResult(e)))
