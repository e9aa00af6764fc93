"""SyncGroup of classic groups (Kafka `GroupMetadataManager.classicGroupSync`): the leader's
assignment is stored, then every member waiting in CompletingRebalance gets its share; the
waiters of a group that rebalances again or moves away are failed here too. A consumer group's
classic members (online migration) are answered by `consumer_group.classic_members`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kmirror.coordinator.consumer_group import classic_members
from kmirror.coordinator.group import static_members
from kmirror.coordinator.group.group import ClassicGroup
from kmirror.coordinator.group.member import MemberMetadata
from kmirror.coordinator.group.sensors import GroupSensor
from kmirror.coordinator.group.state import GroupState
from kmirror.coordinator.results import GroupOutput, JoinResult, SyncResult
from kmirror.protocol.errors import ErrorCode

if TYPE_CHECKING:  # the core imports this module
    from kmirror.coordinator.group.coordinator import GroupCoordinator

E = ErrorCode


def sync(
    core: GroupCoordinator,
    request_id: int,
    *,
    group_id: str,
    generation_id: int,
    member_id: str,
    protocol_type: str | None,
    protocol_name: str | None,
    assignments: dict[str, bytes],
    group_instance_id: str | None = None,
) -> GroupOutput:
    out = GroupOutput()

    def reply(error: ErrorCode) -> GroupOutput:
        out.responses.append((request_id, SyncResult(error)))
        return out

    err = core.coordinator_error(group_id)
    if err is not None:
        return reply(err)
    consumer_group = core.state.consumer_groups.get(group_id)
    if consumer_group is not None:
        if consumer_group.is_empty:
            return reply(E.unknown_member_id)
        return classic_members.sync(core, request_id, consumer_group, member_id=member_id,
                                    instance_id=group_instance_id, generation_id=generation_id,
                                    protocol_type=protocol_type, protocol_name=protocol_name)
    group = core.state.groups.get(group_id)
    if group is None:
        return reply(E.unknown_member_id)
    if group.is_in(GroupState.DEAD):
        return reply(E.coordinator_not_available)
    member_error = static_members.validate_member(group, member_id, group_instance_id)
    if member_error != E.none:
        return reply(member_error)
    if generation_id != group.generation_id:
        return reply(E.illegal_generation)
    if (protocol_type is not None and protocol_type != group.protocol_type) or (
        protocol_name is not None and protocol_name != group.protocol_name
    ):
        return reply(E.inconsistent_group_protocol)
    if group.is_in(GroupState.EMPTY):
        return reply(E.unknown_member_id)
    if group.is_in(GroupState.PREPARING_REBALANCE):
        return reply(E.rebalance_in_progress)
    member = group.members[member_id]
    group.pending_sync_members.discard(member_id)
    if not group.pending_sync_members:
        group.sync_deadline_ms = None
    group.heartbeat_deadline_ms[member_id] = core.clock.monotonic_ms() + member.session_timeout_ms
    if group.is_in(GroupState.STABLE):
        out.responses.append((request_id, sync_result(group, member)))
        return out
    # CompletingRebalance: wait for the leader's assignment.
    core.state.pending_syncs[(group_id, member_id)] = request_id
    member.awaiting_sync = True
    if member_id == group.leader_id:
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        generation = group.generation_id
        group.transition_to(GroupState.STABLE, core.clock.now_ms())
        core.sensors.record(GroupSensor.CLASSIC_GROUP_COMPLETED_REBALANCES)

        def persisted() -> GroupOutput:
            return complete_syncs(core, group, generation, E.none)

        def failed(error: ErrorCode) -> GroupOutput:
            return complete_syncs(core, group, generation, error)

        out.extend(core.store_group(group, on_success=persisted, on_failure=failed))
    return out


def sync_result(group: ClassicGroup, member: MemberMetadata) -> SyncResult:
    return SyncResult(E.none, group.protocol_type, group.protocol_name, member.assignment)


def complete_syncs(core: GroupCoordinator, group: ClassicGroup, generation: int, error: ErrorCode) -> GroupOutput:
    out = GroupOutput()
    if group.generation_id != generation:
        return out  # a newer rebalance already answered these syncs
    for member in group.members.values():
        request_id = core.state.pending_syncs.pop((group.group_id, member.member_id), None)
        member.awaiting_sync = False
        if request_id is not None:
            result = sync_result(group, member) if error == E.none else SyncResult(error)
            out.responses.append((request_id, result))
    return out


def fail_syncs(core: GroupCoordinator, group: ClassicGroup, error: ErrorCode) -> GroupOutput:
    out = GroupOutput()
    for member in group.members.values():
        member.awaiting_sync = False
        request_id = core.state.pending_syncs.pop((group.group_id, member.member_id), None)
        if request_id is not None:
            out.responses.append((request_id, SyncResult(error)))
    return out


def fail_waiters(core: GroupCoordinator, group: ClassicGroup, error: ErrorCode) -> GroupOutput:
    out = fail_syncs(core, group, error)
    for member in group.members.values():
        request_id = core.state.pending_joins.pop((group.group_id, member.member_id), None)
        member.awaiting_join = False
        if request_id is not None:
            out.responses.append((request_id, JoinResult(error, member_id=member.member_id)))
    return out
