"""Groups <-> `__consumer_offsets` records: the record a group's generation is stored as,
and rebuilding groups and offsets by replaying a partition (Kafka `GroupMetadataManager.replay`)."""

from __future__ import annotations

from collections.abc import Iterable

from kmirror.coordinator.group.group import ClassicGroup, OffsetAndMetadata
from kmirror.coordinator.group.member import MemberMetadata, Protocol
from kmirror.coordinator.group.state import GroupState
from kmirror.coordinator.offsets.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from kmirror.types import TopicPartition


def group_metadata_record(group: ClassicGroup) -> tuple[bytes, bytes]:
    value = GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation_id,
        protocol=group.protocol_name,
        leader=group.leader_id if group.members else None,
        current_state_timestamp_ms=group.state_timestamp_ms,
        members=tuple(
            MemberRecord(
                m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                m.session_timeout_ms, m.metadata_for(group.protocol_name), m.assignment,
            )
            for m in group.members.values()
        ),
    )
    return encode_group_metadata_key(GroupMetadataKey(group.group_id)), encode_group_metadata_value(value)


def offset_commit_record(group_id: str, tp: TopicPartition, value: OffsetAndMetadata | None) -> tuple[bytes, bytes | None]:
    key = encode_offset_commit_key(OffsetCommitKey(group_id, tp.topic, tp.partition))
    return key, None if value is None else encode_offset_commit_value(value)


PendingOffsets = dict[str, dict[int, dict[TopicPartition, OffsetAndMetadata]]]


def remove_pending_transactional_offset(pending_txn_offsets: PendingOffsets, group_id: str, tp: TopicPartition) -> bool:
    """What an offset tombstone written outside a transaction does to the commits of the
    group's open transactions (Kafka `OffsetMetadataManager.replay`): it removes them, so a
    later COMMIT marker does not bring the offset back. True if there was one."""
    dropped = False
    for pending in pending_txn_offsets.get(group_id, {}).values():
        dropped = pending.pop(tp, None) is not None or dropped
    return dropped


def remove_from_open_transactions(open_txns: dict[int, list[tuple[bytes, bytes | None]]], key: bytes) -> None:
    """A tombstone of `key` written outside the open transactions: their records of `key` go."""
    for producer_id, held in open_txns.items():
        if any(k == key for k, _ in held):
            open_txns[producer_id] = [(k, v) for k, v in held if k != key]


def group_tombstone(group_id: str) -> tuple[bytes, None]:
    return encode_group_metadata_key(GroupMetadataKey(group_id)), None


def replay(records: Iterable[tuple[bytes, bytes | None]], now_wall_ms: int) -> dict[str, ClassicGroup]:
    """Later records win; tombstones delete. A group known only through offsets is Empty
    since `now_wall_ms`; one stored with members is Stable in its stored generation (as Kafka
    loads it), and a group keeps the state timestamp it was stored with."""
    groups: dict[str, ClassicGroup] = {}
    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
    for key_bytes, value_bytes in records:
        key = decode_key(key_bytes)
        if isinstance(key, OffsetCommitKey):
            group_offsets = offsets.setdefault(key.group, {})
            tp = TopicPartition(key.topic, key.partition)
            if value_bytes is None:
                group_offsets.pop(tp, None)
            else:
                group_offsets[tp] = decode_offset_commit_value(value_bytes)
        elif isinstance(key, GroupMetadataKey):
            if value_bytes is None:
                groups.pop(key.group, None)
            else:
                groups[key.group] = _group_from_value(key.group, decode_group_metadata_value(value_bytes))
    for group_id, group_offsets in offsets.items():
        if not group_offsets:
            continue
        group = groups.setdefault(group_id, ClassicGroup(group_id, state_timestamp_ms=now_wall_ms))
        group.offsets.update(group_offsets)
    return groups


def _group_from_value(group_id: str, value: GroupMetadataValue) -> ClassicGroup:
    group = ClassicGroup(
        group_id,
        # -1 (values before v2): unknown, and offset expiry counts from each commit instead
        state_timestamp_ms=value.current_state_timestamp_ms,
        generation_id=value.generation,
        protocol_type=value.protocol_type or None,
        protocol_name=value.protocol,
    )
    for m in value.members:
        protocols = (Protocol(value.protocol, m.subscription),) if value.protocol is not None else ()
        group.add_member(MemberMetadata(
            m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            m.session_timeout_ms, value.protocol_type, protocols, assignment=m.assignment,
        ))
    if group.members:
        group.leader_id = value.leader if value.leader in group.members else next(iter(group.members))
        group.state = GroupState.STABLE  # loading is not a transition: the group is rebuilt
    return group
