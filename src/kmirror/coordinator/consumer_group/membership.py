"""Members leaving a consumer group: by request (epoch -1; a static member's -2; a classic
member's LeaveGroup), by session expiry, fenced for not revoking within its rebalance timeout,
or a classic member that does not JoinGroup / SyncGroup within its rebalance timeout (Kafka
`consumerGroupLeave`, `consumerGroupFenceMembers`, `onConsumerGroupSessionTimeout`). A member
that goes releases its partitions and bumps the group epoch; the next heartbeat of another
member runs the assignor. When every member left uses the classic protocol the group is
downgraded to a classic group instead (`migration`).

A static member leaving with -2 keeps its place and assignment (at epoch -2) until its session
expires, so that the same `group.instance.id` rejoining takes them over without a rebalance.
"""

from __future__ import annotations

from kmirror.coordinator.consumer_group import migration, records
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
        out = GroupOutput()
        recs = fence(core, group, [member_id], out)
        result = HeartbeatResult(E.none, member_id=member_id, member_epoch=epoch)
        return out.extend(core.append(group_id, recs, lambda: reply(result),
                                      lambda e: reply(HeartbeatResult(append_error(e)))))
    result = HeartbeatResult(E.none, member_id=member_id, member_epoch=epoch)
    return core.append(group_id, recs, lambda: reply(result), lambda e: reply(HeartbeatResult(append_error(e))))


def fence(core: GroupsCore, group: ConsumerGroup, member_ids: list[str], out: GroupOutput) -> list[records.Record]:
    """Kafka `consumerGroupFenceMembers`: the members go, releasing their partitions, and the
    group epoch is bumped; or, when every member staying uses the classic protocol, the group
    becomes a classic group (whose rebalance's effects go to `out`). The records saying so."""
    if migration.can_downgrade(core, group, member_ids):
        return migration.downgrade(core, group, member_ids, out)
    recs: list[records.Record] = []
    for member_id in member_ids:
        group.remove_member(member_id)
        recs.extend(records.member_tombstones(group.group_id, member_id))
    group.group_epoch += 1
    recs.append(records.epoch_record(records.GROUP_METADATA, group.group_id, group.group_epoch))
    return recs


def replace_static_member(
    group: ConsumerGroup, instance_id: str, new_member_id: str, out: list[records.Record], *,
    by_classic_member: bool = False,
) -> ConsumerGroupMember | HeartbeatResult:
    """A static member rejoining (epoch 0, or JoinGroup with no member id) with its instance id:
    if the previous holder left with -2, has the same member id, or either of them uses the
    classic protocol (which sends no leave for a static member), the new member takes over its
    subscription and target assignment, so it gets its partitions back with nothing moved;
    otherwise the new one is refused with UNRELEASED_INSTANCE_ID (Kafka
    `getOrMaybeSubscribeStaticConsumerGroupMember`)."""
    old = group.members[group.static_members[instance_id]]
    if old.member_id == new_member_id:
        return old
    if old.member_epoch != STATIC_LEAVE_EPOCH and not old.uses_classic_protocol and not by_classic_member:
        # a classic member sends no leave on shutdown: its instance is taken over at once
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
    """Members whose session, revocation, join or sync deadline passed are fenced."""
    out = GroupOutput()
    for group in list(core.consumer_groups.values()):
        expired = sorted({m for deadlines in group.deadlines() for m, d in deadlines.items() if d <= now_ms})
        if not expired:
            continue
        recs = fence(core, group, expired, out)
        out.extend(core.append(group.group_id, recs, GroupOutput, lambda _e: GroupOutput()))
    return out


def next_deadline_ms(core: GroupsCore) -> int | None:
    deadlines = [d for g in core.consumer_groups.values() for ds in g.deadlines() for d in ds.values()]
    return min(deadlines, default=None)
