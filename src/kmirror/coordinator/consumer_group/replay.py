"""Rebuilding consumer groups from a `__consumer_offsets` partition's records (Kafka
`GroupMetadataManager.replay` for record types 3, 5, 6, 7, 8). Later records win; a
tombstone deletes. Offsets are attached by the caller, which also replays the classic records."""

from __future__ import annotations

from collections.abc import Iterable

from kmirror.coordinator.consumer_group import records as r
from kmirror.coordinator.consumer_group.group import ConsumerGroup
from kmirror.coordinator.consumer_group.member import ConsumerGroupMember


def replay(records: Iterable[tuple[bytes, bytes | None]]) -> dict[str, ConsumerGroup]:
    groups: dict[str, ConsumerGroup] = {}
    members: dict[str, dict[str, ConsumerGroupMember]] = {}
    for key_bytes, value in records:
        if len(key_bytes) < 2:
            continue
        key = r.decode_key(key_bytes)
        if key is None:
            continue
        gid, mid = key.group_id, key.member_id or ""
        if key.record_type == r.GROUP_METADATA:
            if value is None:
                groups.pop(gid, None)
                members.pop(gid, None)
            else:
                groups.setdefault(gid, ConsumerGroup(gid)).group_epoch = r.decode_epoch(value)
            continue
        group = groups.setdefault(gid, ConsumerGroup(gid))
        group_members = members.setdefault(gid, {})
        if key.record_type == r.TARGET_METADATA:
            if value is not None:
                group.assignment_epoch = r.decode_epoch(value)
        elif key.record_type == r.TARGET_MEMBER:
            if value is None:
                group.target.pop(mid, None)
            else:
                group.target[mid] = r.decode_target_member(value)
        elif key.record_type == r.MEMBER_METADATA:
            if value is None:
                group_members.pop(mid, None)
            else:
                subscription = r.decode_member_metadata(mid, value)
                old = group_members.get(mid)
                if old is not None:
                    subscription = subscription.with_changes(
                        member_epoch=old.member_epoch, previous_member_epoch=old.previous_member_epoch,
                        state=old.state, assigned=old.assigned, pending_revocation=old.pending_revocation)
                group_members[mid] = subscription
        elif key.record_type == r.CURRENT_ASSIGNMENT and value is not None:
            group_members[mid] = r.apply_current_assignment(group_members.get(mid, ConsumerGroupMember(mid)), value)
    for gid, group in groups.items():
        group.subscribed_metadata = None
        for member in members.get(gid, {}).values():
            group.update_member(member)
    return groups
