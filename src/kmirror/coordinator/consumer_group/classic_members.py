"""SyncGroup, Heartbeat and LeaveGroup of the classic members of a consumer group (Kafka
`GroupMetadataManager.classicGroupSyncToConsumerGroup`, `classicGroupHeartbeatToConsumerGroup`,
`classicGroupLeaveToConsumerGroup`), the rest of a classic consumer's life in a group that is
being migrated online (its JoinGroup: `classic_join`).

- SyncGroup answers the member's assigned partitions in the `consumer` protocol, written in the
  version of its subscription, unless a newer group epoch asks it to rejoin first.
- Heartbeat keeps its session (its JoinGroup session timeout) and answers REBALANCE_IN_PROGRESS
  when the member should JoinGroup again: the group epoch moved past it, it must revoke
  partitions, or the partitions it waits for were released. It then has its rebalance timeout
  to rejoin, and after a JoinGroup its rebalance timeout to SyncGroup, or it is fenced.
- LeaveGroup fences the members named (any protocol: an administrator may remove members by
  instance id), which may downgrade the group (`membership.fence`).
"""

from __future__ import annotations

from kmirror.coordinator.consumer_group import membership
from kmirror.coordinator.consumer_group.group import ConsumerGroup
from kmirror.coordinator.consumer_group.member import ConsumerGroupMember
from kmirror.coordinator.consumer_group.ports import GroupsCore, topic_names
from kmirror.coordinator.consumer_group.state import MemberState
from kmirror.coordinator.results import GroupOutput, LeaveMemberResult, LeaveResult, SyncResult
from kmirror.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolError,
    encode_assignment,
    protocol_version,
)
from kmirror.protocol.errors import ErrorCode

E = ErrorCode


def validate_member(group: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerGroupMember | ErrorCode:
    """Kafka `validateConsumerGroupMember`: the member, by instance id when it has one
    (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID when another member id holds the instance). An
    instance whose member left the group (a static leave keeps its place) has no member:
    UNKNOWN_MEMBER_ID, as Kafka's `staticMember` finds none."""
    if instance_id is None:
        return group.members.get(member_id) or E.unknown_member_id
    holder = group.static_members.get(instance_id)
    if holder is None:
        return E.unknown_member_id
    if holder != member_id:
        return E.fenced_instance_id
    return group.members.get(holder) or E.unknown_member_id


def _classic_member(group: ConsumerGroup, member_id: str, instance_id: str | None,
                    generation_id: int) -> ConsumerGroupMember | ErrorCode:
    member = validate_member(group, member_id, instance_id)
    if isinstance(member, ErrorCode):
        return member
    if not member.uses_classic_protocol:
        return E.unknown_member_id
    if generation_id != member.member_epoch:
        return E.illegal_generation
    return member


def _ask_to_rejoin(core: GroupsCore, group: ConsumerGroup, member: ConsumerGroupMember) -> None:
    """The member has its rebalance timeout to JoinGroup (Kafka `scheduleConsumerGroupJoinTimeoutIfAbsent`)."""
    group.join_deadline_ms.setdefault(member.member_id, core.clock.monotonic_ms() + member.rebalance_timeout_ms)


def sync(core: GroupsCore, request_id: int, group: ConsumerGroup, *, member_id: str, instance_id: str | None,
         generation_id: int, protocol_type: str | None, protocol_name: str | None) -> GroupOutput:
    def reply(result: SyncResult) -> GroupOutput:
        return GroupOutput(responses=[(request_id, result)])

    member = _classic_member(group, member_id, instance_id, generation_id)
    if isinstance(member, ErrorCode):
        return reply(SyncResult(member))
    assert member.classic is not None
    if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or (
        protocol_name is not None and protocol_name != member.classic.protocol_name
    ):
        return reply(SyncResult(E.inconsistent_group_protocol))
    if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
        # a member still revoking rejoins once it has; the others catch up with the new epoch first
        _ask_to_rejoin(core, group, member)
        return reply(SyncResult(E.rebalance_in_progress))
    group.sync_deadline_ms.pop(member.member_id, None)
    group.session_deadline_ms[member.member_id] = core.clock.monotonic_ms() + member.classic.session_timeout_ms
    return reply(SyncResult(E.none, protocol_type, protocol_name, assignment(core, member)))


def assignment(core: GroupsCore, member: ConsumerGroupMember) -> bytes:
    """The member's assigned partitions as a `consumer` protocol assignment, in the version of
    its subscription (Kafka `prepareAssignment`)."""
    assert member.classic is not None
    try:
        version = protocol_version(member.classic.metadata)
    except ConsumerProtocolError:
        version = 0
    names = topic_names(core.topics())
    return encode_assignment({names[t]: ps for t, ps in member.assigned.items() if t in names}, version)


def heartbeat(core: GroupsCore, group: ConsumerGroup, *, member_id: str, instance_id: str | None,
              generation_id: int) -> ErrorCode:
    member = _classic_member(group, member_id, instance_id, generation_id)
    if isinstance(member, ErrorCode):
        return member
    assert member.classic is not None
    group.session_deadline_ms[member.member_id] = core.clock.monotonic_ms() + member.classic.session_timeout_ms
    if (
        member.member_epoch < group.group_epoch
        or member.state is MemberState.UNREVOKED_PARTITIONS
        or (member.state is MemberState.UNRELEASED_PARTITIONS and not group.waiting_on_unreleased_partition(member))
    ):
        _ask_to_rejoin(core, group, member)
        return E.rebalance_in_progress
    return E.none


def leave(core: GroupsCore, request_id: int, group: ConsumerGroup,
          members: list[tuple[str, str | None]]) -> GroupOutput:
    """LeaveGroup of (member id, instance id) pairs; an empty member id with an instance id is
    an administrative removal of that instance's member."""
    results: list[LeaveMemberResult] = []
    leaving: list[str] = []
    for member_id, instance_id in members:
        if instance_id is None:
            found: ConsumerGroupMember | ErrorCode = group.members.get(member_id) or E.unknown_member_id
        elif not member_id:
            holder = group.static_members.get(instance_id)
            found = group.members[holder] if holder is not None else E.unknown_member_id
        else:
            found = validate_member(group, member_id, instance_id)
        error = found if isinstance(found, ErrorCode) else E.none
        if isinstance(found, ConsumerGroupMember) and found.member_id not in leaving:
            leaving.append(found.member_id)
        results.append(LeaveMemberResult(member_id, instance_id, error))

    def reply() -> GroupOutput:
        return GroupOutput(responses=[(request_id, LeaveResult(E.none, tuple(results)))])

    if not leaving:
        return reply()
    out = GroupOutput()
    recs = membership.fence(core, group, leaving, out)
    return out.extend(core.append(group.group_id, recs, reply,
                                  lambda e: GroupOutput(responses=[(request_id, LeaveResult(membership.append_error(e)))])))
