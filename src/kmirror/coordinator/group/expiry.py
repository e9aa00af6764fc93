"""A classic group's timer-driven operations (Kafka's `ClassicGroup` timeouts): pending
members whose MEMBER_ID_REQUIRED handshake lapsed, expired sessions, the delayed join and the
sync timeout. The core calls `deadlines` to arm its one timer and `expire` when it fires."""

from __future__ import annotations

from typing import Protocol

from kmirror.coordinator.group.group import ClassicGroup
from kmirror.coordinator.group.state import GroupState
from kmirror.coordinator.results import GroupOutput


class RebalancingCore(Protocol):
    """What expiry needs of the group coordinator core."""

    def try_complete_join(self, group: ClassicGroup, out: GroupOutput) -> None: ...

    def complete_join(self, group: ClassicGroup, out: GroupOutput) -> None: ...

    def remove_member_and_update_group(self, group: ClassicGroup, member_id: str, out: GroupOutput) -> None: ...


def deadlines(group: ClassicGroup) -> list[int]:
    out = [*group.heartbeat_deadline_ms.values(), *group.pending_members.values()]
    out.extend(d for d in (group.join_deadline_ms, group.sync_deadline_ms) if d is not None)
    return out


def expire(core: RebalancingCore, group: ClassicGroup, now: int, out: GroupOutput) -> None:
    for member_id in list(group.pending_members):
        deadline = group.pending_members.get(member_id)
        if deadline is not None and deadline <= now:
            del group.pending_members[member_id]
            core.try_complete_join(group, out)
    for member_id in list(group.heartbeat_deadline_ms):
        # Re-read: expiring one member may complete a join that re-arms the others.
        deadline = group.heartbeat_deadline_ms.get(member_id)
        member = group.members.get(member_id)
        if member is None or deadline is None or deadline > now:
            continue
        if member.awaiting_join or member.awaiting_sync:
            # Kept alive while waiting on the coordinator; the rebalance timeout governs.
            group.heartbeat_deadline_ms[member_id] = now + member.session_timeout_ms
            continue
        core.remove_member_and_update_group(group, member_id, out)
    if group.join_deadline_ms is not None and group.join_deadline_ms <= now:
        if group.is_in(GroupState.PREPARING_REBALANCE):
            core.complete_join(group, out)
        else:
            group.join_deadline_ms = None
    if group.sync_deadline_ms is not None and group.sync_deadline_ms <= now:
        group.sync_deadline_ms = None
        if group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and group.pending_sync_members:
            # Kafka `onSyncTimeout`: members that never synced are removed.
            for member_id in list(group.pending_sync_members):
                core.remove_member_and_update_group(group, member_id, out)
