"""Members leaving a consumer group: by request (epoch -1; a static member's -2), by session
expiry, or fenced for not revoking within its rebalance timeout (Kafka
`consumerGroupLeave`, `consumerGroupFenceMember`, `onConsumerGroupSessionTimeout`). A member
that goes releases its partitions and bumps the group epoch; the next heartbeat of another
member runs the assignor.

A static member leaving with -2 keeps its place and assignment (at epoch -2) until its session
expires, so that the same `group.instance.id` rejoining takes them over without a rebalance.
"""

from __future__ import annotations

from kmirror.coordinator.consumer_group import records
from kmirror.coordinator.consumer_group.group import ConsumerGroup
from kmirror.coordinator.consumer_group.member import ConsumerGroupMember
from kmirror.coordinator.consumer_group.messages import STATIC_LEAVE_EPOCH, HeartbeatResult
from kmirror.coordinator.consumer_group.ports import GroupsCore
from kmirror.coordinator.consumer_group.state import MemberState
from kmirror.coordinator.results import GroupOutput
from kmirror.protocol.errors import ErrorCode

E = ErrorCode


def append_error(error: ErrorCode) -> ErrorCode:
    """What a client retries on when the coordinator could not persist (as commits map it)."""
    if error in (E.not_leader_or_follower, E.not_coordinator):
        return E.not_coordinator
    return E.coordinator_not_available


def leave(core: GroupsCore, request_id: int, group_id: str, member_id: str, epoch: int,
          instance_id: str | None) -> GroupOutput:
    def reply(result: HeartbeatResult) -> GroupOutput:
        return GroupOutput(responses=[(request_id, result)])

    group = core.consumer_groups.get(group_id)
    if group is None:
        return reply(HeartbeatResult(E.unknown_member_id, f"Consumer group {group_id} not found."))
    if epoch == STATIC_LEAVE_EPOCH:
        current_id = group.static_members.get(instance_id or "")
        member = group.members.get(current_id or "")
        if member is None:
            return reply(HeartbeatResult(E.unknown_member_id, f"Instance id {instance_id} is unknown."))
        if member.member_id != member_id:
            return reply(HeartbeatResult(E.fenced_instance_id, f"Instance id {instance_id} is owned by another member."))
        left = member.with_changes(member_epoch=STATIC_LEAVE_EPOCH)
        group.update_member(left)
        recs = [records.current_assignment_record(group_id, left)]
    else:
        member = group.members.get(member_id)
        if member is None:
            return reply(HeartbeatResult(E.unknown_member_id, f"Member {member_id} is not a member of group {group_id}."))
        recs = remove_member(group, member_id)
    result = HeartbeatResult(E.none, member_id=member_id, member_epoch=epoch)
    return core.append(group_id, recs, lambda: reply(result), lambda e: reply(HeartbeatResult(append_error(e))))


def remove_member(group: ConsumerGroup, member_id: str) -> list[records.Record]:
    """Drop the member, release its partitions, bump the group epoch: the records saying so."""
    group.remove_member(member_id)
    group.group_epoch += 1
    return [
        *records.member_tombstones(group.group_id, member_id),
        records.epoch_record(records.GROUP_METADATA, group.group_id, group.group_epoch),
    ]


def replace_static_member(
    group: ConsumerGroup, instance_id: str, new_member_id: str, out: list[records.Record]
) -> ConsumerGroupMember | HeartbeatResult:
    """A static member rejoining (epoch 0) with its instance id: if the previous holder left
    with -2 (or has the same member id) the new member takes over its subscription and target
    assignment, so it gets its partitions back with nothing moved; if the previous holder is
    still active the new one is refused with UNRELEASED_INSTANCE_ID (Kafka)."""
    old = group.members[group.static_members[instance_id]]
    if old.member_id == new_member_id:
        return old
    if old.member_epoch != STATIC_LEAVE_EPOCH:
        return HeartbeatResult(
            E.unreleased_instance_id, f"Static member {old.member_id} with instance id {instance_id} is not released yet.")
    target = group.target.get(old.member_id, {})
    out.extend(records.member_tombstones(group.group_id, old.member_id))
    group.remove_member(old.member_id)
    group.target[new_member_id] = target
    out.append(records.target_member_record(group.group_id, new_member_id, target))
    return old.with_changes(member_id=new_member_id, member_epoch=0, previous_member_epoch=-1,
                            state=MemberState.STABLE, pending_revocation={})


def expire(core: GroupsCore, now_ms: int) -> GroupOutput:
    """Members whose session or revocation deadline passed are removed."""
    out = GroupOutput()
    for group in list(core.consumer_groups.values()):
        expired = [m for m, d in group.session_deadline_ms.items() if d <= now_ms]
        expired += [m for m, d in group.revocation_deadline_ms.items() if d <= now_ms and m not in expired]
        if not expired:
            continue
        recs: list[records.Record] = []
        for member_id in expired:
            recs.extend(remove_member(group, member_id))
        out.extend(core.append(group.group_id, recs, GroupOutput, lambda _e: GroupOutput()))
    return out


def next_deadline_ms(core: GroupsCore) -> int | None:
    deadlines = [d for g in core.consumer_groups.values()
                 for d in (*g.session_deadline_ms.values(), *g.revocation_deadline_ms.values())]
    return min(deadlines, default=None)
