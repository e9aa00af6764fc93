"""A restarted static member's JoinGroup (Kafka `updateStaticMemberThenRebalanceOrCompleteJoin`):
the orchestration on the coordinator core; the rules are in `static_members`."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from kmirror.coordinator.group import static_members
from kmirror.coordinator.group.group import ClassicGroup
from kmirror.coordinator.group.member import Protocol
from kmirror.coordinator.group.state import GroupState
from kmirror.coordinator.results import GroupOutput, JoinResult, SyncResult
from kmirror.protocol.errors import ErrorCode

if TYPE_CHECKING:  # the core imports this module
    from kmirror.coordinator.group.coordinator import GroupCoordinator

E = ErrorCode


def rejoin_static(
    core: GroupCoordinator, group: ClassicGroup, request_id: int, instance_id: str, new_id: str, client_id: str,
    client_host: str, session_timeout_ms: int, rebalance_timeout_ms: int, protocols: tuple[Protocol, ...],
    supports_skip_assignment: bool, out: GroupOutput,
) -> GroupOutput:
    """Kafka `updateStaticMemberThenRebalanceOrCompleteJoin`: the instance's member takes the new
    id and keeps its assignment; the old id's waiting JoinGroup/SyncGroup are fenced. A Stable
    group whose selected protocol stays the same does not rebalance: the group is stored with
    the new member id and the member gets the current generation (the leader with
    skip_assignment from JoinGroup v9, KIP-814)."""
    old_id = group.static_members[instance_id]
    current_leader = group.leader_id or ""
    old_join = core.state.pending_joins.pop((group.group_id, old_id), None)
    if old_join is not None:
        out.responses.append((old_join, JoinResult(E.fenced_instance_id, member_id=old_id)))
    old_sync = core.state.pending_syncs.pop((group.group_id, old_id), None)
    if old_sync is not None:
        out.responses.append((old_sync, SyncResult(E.fenced_instance_id)))
    member, replaced = static_members.replace_static_member(group, instance_id, new_id)
    member.client_id, member.client_host = client_id, client_host
    member.protocols = protocols
    member.session_timeout_ms, member.rebalance_timeout_ms = session_timeout_ms, rebalance_timeout_ms
    group.heartbeat_deadline_ms[new_id] = core.clock.monotonic_ms() + session_timeout_ms
    core.await_join(group, member, request_id, out)
    if group.is_in(GroupState.STABLE):
        if group.select_protocol() != group.protocol_name:
            core.prepare_rebalance(group, out)
            core.try_complete_join(group, out)
            return out
        key = (group.group_id, new_id)
        generation = group.generation_id

        def stored() -> GroupOutput:
            done = GroupOutput()
            rid = core.state.pending_joins.pop(key, None)
            if rid is None or group.generation_id != generation or new_id not in group.members:
                return done  # a rebalance answered it meanwhile
            member.awaiting_join = False
            is_leader = new_id == group.leader_id
            if supports_skip_assignment:
                result = core.join_result(group, member, with_members=is_leader)
                result = replace(result, skip_assignment=is_leader)
            else:
                result = replace(core.join_result(group, member, with_members=False), leader=current_leader)
            done.responses.append((rid, result))
            return done

        def failed(error: ErrorCode) -> GroupOutput:
            done = GroupOutput()
            rid = core.state.pending_joins.pop(key, None)
            member.awaiting_join = False
            static_members.revert_replacement(group, instance_id, replaced)
            if rid is not None:
                done.responses.append((rid, JoinResult(
                    static_members.group_metadata_append_error(error), group.generation_id, group.protocol_type, group.protocol_name,
                    current_leader, "",
                )))
            return done

        out.extend(core.store_group(group, on_success=stored, on_failure=failed))
        return out
    if group.is_in(GroupState.COMPLETING_REBALANCE):
        # The leader may be assigning to the old member id: a new rebalance, as Kafka does.
        core.prepare_rebalance(group, out)
    core.try_complete_join(group, out)
    return out
