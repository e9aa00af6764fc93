"""Static group membership (KIP-345) rules of a classic group, as Kafka's `ClassicGroup` and
`GroupMetadataManager` apply them.

A member that joins with a `group.instance.id` is static: the group maps the instance id to
its current member id. A restarted instance joins with an empty member id and takes over the
mapping (a new member id, the old assignment); the process holding the old member id is then
fenced with FENCED_INSTANCE_ID on every request that names the instance. A static member that
stops without LeaveGroup stays in the group until its session times out, and a rebalance does
not drop it for not rejoining.

Pure functions over a `ClassicGroup`: no clock, no I/O; the coordinator core calls them.
"""

from __future__ import annotations

from dataclasses import dataclass

from kmirror.coordinator.group.group import ClassicGroup
from kmirror.coordinator.group.member import MemberMetadata, Protocol
from kmirror.protocol.errors import ErrorCode

E = ErrorCode


def validate_member(group: ClassicGroup, member_id: str, group_instance_id: str | None) -> ErrorCode:
    """Kafka `ClassicGroup.validateMember`: UNKNOWN_MEMBER_ID for an unknown member or instance;
    FENCED_INSTANCE_ID when the instance id is now held by another member id."""
    if group_instance_id is None:
        return E.none if group.has_member(member_id) else E.unknown_member_id
    current = group.static_members.get(group_instance_id)
    if current is None:
        return E.unknown_member_id
    if current != member_id:
        return E.fenced_instance_id
    return E.none


def new_member_id(client_id: str, group_instance_id: str | None, uuid: str) -> str:
    """Kafka `generateMemberId`: static members are named after their instance id."""
    return f"{group_instance_id if group_instance_id is not None else client_id}-{uuid}"


@dataclass(frozen=True, slots=True)
class Replaced:
    """What a static member held before its instance rejoined, to undo the replacement if the
    group metadata cannot be stored."""

    old_member_id: str
    protocols: tuple[Protocol, ...]
    rebalance_timeout_ms: int
    session_timeout_ms: int
    was_pending_sync: bool


def replace_static_member(group: ClassicGroup, group_instance_id: str, new_member_id: str) -> tuple[MemberMetadata, Replaced]:
    """Kafka `ClassicGroup.replaceStaticMember`: the instance's member takes `new_member_id`,
    keeping its assignment and its leadership. The caller fences the old id's waiters."""
    old_member_id = group.static_members[group_instance_id]
    member = group.members.pop(old_member_id)
    deadline = group.heartbeat_deadline_ms.pop(old_member_id, None)
    was_pending_sync = old_member_id in group.pending_sync_members
    group.pending_sync_members.discard(old_member_id)
    replaced = Replaced(old_member_id, member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms,
                        was_pending_sync)
    member.member_id = new_member_id
    member.awaiting_join = member.awaiting_sync = False
    group.members[new_member_id] = member
    group.static_members[group_instance_id] = new_member_id
    if deadline is not None:
        group.heartbeat_deadline_ms[new_member_id] = deadline
    if was_pending_sync:
        group.pending_sync_members.add(new_member_id)
    if group.leader_id == old_member_id:
        group.leader_id = new_member_id
    return member, replaced


def revert_replacement(group: ClassicGroup, group_instance_id: str, replaced: Replaced) -> None:
    """Undo `replace_static_member` (Kafka: the store of the new member id failed)."""
    current = group.static_members.get(group_instance_id)
    if current is None or current not in group.members:
        return  # the member left or expired meanwhile: nothing to give back
    member = group.members.pop(current)
    deadline = group.heartbeat_deadline_ms.pop(current, None)
    group.pending_sync_members.discard(current)
    member.member_id = replaced.old_member_id
    member.protocols = replaced.protocols
    member.rebalance_timeout_ms = replaced.rebalance_timeout_ms
    member.session_timeout_ms = replaced.session_timeout_ms
    member.awaiting_join = False
    group.members[replaced.old_member_id] = member
    group.static_members[group_instance_id] = replaced.old_member_id
    if deadline is not None:
        group.heartbeat_deadline_ms[replaced.old_member_id] = deadline
    if replaced.was_pending_sync:
        group.pending_sync_members.add(replaced.old_member_id)
    if group.leader_id == current:
        group.leader_id = replaced.old_member_id


def group_metadata_append_error(error: ErrorCode) -> ErrorCode:
    """Kafka `appendGroupMetadataErrorToResponseError`: what a member is told when the group
    metadata record could not be appended."""
    if error in (E.unknown_topic_or_partition, E.not_enough_replicas, E.request_timed_out):
        return E.coordinator_not_available
    if error in (E.not_leader_or_follower, E.kafka_storage_error):
        return E.not_coordinator
    if error in (E.message_too_large, E.record_list_too_large, E.invalid_fetch_size):
        return E.unknown_server_error
    return error


def leave_target(group: ClassicGroup | None, member_id: str, group_instance_id: str | None) -> tuple[ErrorCode, str]:
    """Kafka `classicGroupLeave`, one member of the batch: the error for it and the member id
    to remove. An empty member id with an instance id removes that instance's member (the
    administrative removal of KIP-345); a member id with a stale instance mapping is fenced."""
    if group is None:
        return E.unknown_member_id, member_id
    if not member_id:
        if group_instance_id is not None and group_instance_id in group.static_members:
            return E.none, group.static_members[group_instance_id]
        return E.unknown_member_id, member_id
    if member_id in group.pending_members:
        return E.none, member_id
    return validate_member(group, member_id, group_instance_id), member_id


def not_rejoined_dynamic_members(group: ClassicGroup) -> list[str]:
    """Members a completed join drops: dynamic ones that did not rejoin. A static member that
    did not rejoin keeps its place until its session or the sync deadline ends it."""
    return [m.member_id for m in group.members.values() if not m.awaiting_join and m.group_instance_id is None]


def elect_joined_leader(group: ClassicGroup) -> bool:
    """Kafka `maybeElectNewJoinedLeader`: the leader must be a member that rejoined. False when
    no member rejoined (the join phase is then postponed)."""
    if group.leader_id is None:
        return False
    leader = group.members.get(group.leader_id)
    if leader is not None and leader.awaiting_join:
        return True
    for member in group.members.values():
        if member.awaiting_join:
            group.leader_id = member.member_id
            return True
    return False
