"""ShareGroupHeartbeat (KIP-932) on the group coordinator core (Kafka
`GroupMetadataManager.shareGroupHeartbeat`), and the sessions of share group members.

One heartbeat, in order: validate the request; leave if the epoch is -1; find or create the
group (an id held by a classic or consumer group is GROUP_ID_NOT_FOUND); find or create the
member and check its epoch (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH); apply its subscription,
bumping the group epoch when it or the subscribed topics' metadata changed; run the assignor
when the group epoch is ahead of the assignment epoch; move the member to its target
assignment at the assignment epoch; re-arm its session.

The group epoch and each changed member are written to the group's `__consumer_offsets`
partition (`records`) before the answer; loading them is `loading`'s
(docs/design/share-groups.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from kmirror.coordinator.consumer_group import membership
from kmirror.coordinator.consumer_group.messages import HeartbeatResult
from kmirror.coordinator.consumer_group.ports import BROKER_DEFAULTS, GroupConfig, GroupsCore, TopicsView
from kmirror.coordinator.results import GroupOutput
from kmirror.coordinator.share_group import assignor
from kmirror.coordinator.share_group import records as records_
from kmirror.coordinator.share_group.group import ShareGroup, ShareGroupMember
from kmirror.protocol.errors import ErrorCode

E = ErrorCode
LEAVE_EPOCH = -1


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


def validate(req: ShareHeartbeatRequest) -> str | None:
    """Kafka `throwIfShareGroupHeartbeatRequestIsInvalid`: why the request is INVALID_REQUEST."""
    if not req.group_id:
        return "GroupId can't be empty."
    if req.rack_id is not None and not req.rack_id:
        return "RackId can't be empty."
    if not req.member_id:
        return "MemberId can't be empty."
    if req.member_epoch == 0 and not req.subscribed_topic_names:
        return "SubscribedTopicNames must be set in first request."
    if req.member_epoch < LEAVE_EPOCH:
        return f"MemberEpoch is invalid: {req.member_epoch}."
    return None


def heartbeat(core: GroupsCore, request_id: int, req: ShareHeartbeatRequest, topics: TopicsView,
              group_config: GroupConfig = BROKER_DEFAULTS) -> GroupOutput:
    """The heartbeat's answer (a `HeartbeatResult`), after the membership records it changed
    are appended."""
    def reply(result: HeartbeatResult) -> GroupOutput:
        return GroupOutput(responses=[(request_id, result)])

    def stored(records: list[records_.Record], result: HeartbeatResult) -> GroupOutput:
        if not records:
            return reply(result)
        return core.append(req.group_id, records, lambda: reply(result),
                           lambda e: reply(HeartbeatResult(membership.append_error(e))))

    err = core.coordinator_error(req.group_id)
    if err is not None:
        return reply(HeartbeatResult(err))
    invalid = validate(req)
    if invalid is not None:
        return reply(HeartbeatResult(E.invalid_request, invalid))
    if req.group_id in core.groups or req.group_id in core.consumer_groups:
        return reply(HeartbeatResult(E.group_id_not_found, f"Group {req.group_id} is not a share group."))
    group = core.share_groups.get(req.group_id)
    if req.member_epoch == LEAVE_EPOCH:
        if group is None or req.member_id not in group.members:
            return reply(HeartbeatResult(E.unknown_member_id,
                                         f"Member {req.member_id} is not a member of group {req.group_id}."))
        return stored(remove_members(group, [req.member_id]),
                      HeartbeatResult(E.none, member_id=req.member_id, member_epoch=LEAVE_EPOCH))
    if group is None:
        if req.member_epoch != 0:
            return reply(HeartbeatResult(E.unknown_member_id, f"Share group {req.group_id} not found."))
        group = core.share_groups[req.group_id] = ShareGroup(req.group_id)

    member = group.members.get(req.member_id)
    if req.member_epoch == 0:
        if member is None:
            if len(group.members) >= core.config.group_share_max_size:
                return reply(HeartbeatResult(
                    E.group_max_size_reached,
                    f"The share group has reached its maximum capacity of {core.config.group_share_max_size} members."))
            member = ShareGroupMember(req.member_id)
    elif member is None:
        return reply(HeartbeatResult(E.unknown_member_id,
                                     f"Member {req.member_id} is not a member of group {req.group_id}."))
    elif req.member_epoch != member.member_epoch:
        return reply(HeartbeatResult(
            E.fenced_member_epoch, f"The share group member has a member epoch ({req.member_epoch}) other than the "
            f"one known by the group coordinator ({member.member_epoch})."))

    joined = member.member_id not in group.members
    subscribed = (tuple(sorted(set(req.subscribed_topic_names)))
                  if req.subscribed_topic_names is not None else member.subscribed_topic_names)
    updated = member.with_changes(
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        client_id=req.client_id, client_host=req.client_host, subscribed_topic_names=subscribed)
    group.members[updated.member_id] = updated
    metadata = subscribed_metadata(group, topics)
    records: list[records_.Record] = []
    if joined or subscribed != member.subscribed_topic_names or metadata != group.subscribed_metadata:
        group.group_epoch += 1
        group.subscribed_metadata = metadata
        records.append(records_.group_record(group))
    if group.group_epoch > group.assignment_epoch:
        reassign(group, metadata)

    target = group.target.get(updated.member_id, {})
    current = updated.with_changes(member_epoch=group.assignment_epoch, assignment=target)
    group.members[current.member_id] = current
    if current.with_changes(assignment={}) != member.with_changes(assignment={}):
        records.append(records_.member_record(group.group_id, current))
    now = core.clock.monotonic_ms()
    group.session_deadline_ms[current.member_id] = now + (
        group_config.session_timeout_ms or core.config.group_share_session_timeout_ms)
    send_assignment = req.member_epoch == 0 or target != member.assignment
    return stored(records, HeartbeatResult(
        E.none, member_id=current.member_id, member_epoch=current.member_epoch,
        heartbeat_interval_ms=group_config.heartbeat_interval_ms or core.config.group_share_heartbeat_interval_ms,
        assignment=dict(target) if send_assignment else None))


def reassign(group: ShareGroup, metadata: dict[str, tuple[uuid.UUID, int]]) -> None:
    """The target assignment at the group epoch (the assignor is a function of the members
    and the topics: loading a group computes it again the same way)."""
    group.target = assignor.assign(group.members, metadata)
    group.assignment_epoch = group.group_epoch


def remove_members(group: ShareGroup, member_ids: Iterable[str]) -> list[records_.Record]:
    """The members leave (or their sessions ended): the group epoch moves, so the others'
    next heartbeats get the new assignment. The records of the change."""
    records = []
    for member_id in member_ids:
        if group.members.pop(member_id, None) is not None:
            records.append(records_.member_tombstone(group.group_id, member_id))
        group.session_deadline_ms.pop(member_id, None)
        group.target.pop(member_id, None)
    if records:
        group.group_epoch += 1
        records.append(records_.group_record(group))
    return records


def subscribed_metadata(group: ShareGroup, topics: TopicsView) -> dict[str, tuple[uuid.UUID, int]]:
    """The subscribed topics the cluster has: name -> (topic id, partition count)."""
    return {name: (topics[name].topic_id, topics[name].partitions)
            for name in sorted(group.subscribed_topics()) if name in topics}


def next_deadline_ms(share_groups: Iterable[ShareGroup]) -> int | None:
    return min((d for g in share_groups for d in g.session_deadline_ms.values()), default=None)


def expire(core: GroupsCore, now_ms: int) -> GroupOutput:
    """Remove every member whose session ended at or before `now_ms`, with its records."""
    out = GroupOutput()
    for group in list(core.share_groups.values()):
        ended = [m for m, deadline in group.session_deadline_ms.items() if deadline <= now_ms]
        if ended:
            out.extend(core.append(group.group_id, remove_members(group, ended), GroupOutput,
                                   lambda _e: GroupOutput()))
    return out
