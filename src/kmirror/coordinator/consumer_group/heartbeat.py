"""ConsumerGroupHeartbeat (KIP-848) on the group coordinator core (Kafka
`GroupMetadataManager.consumerGroupHeartbeat`).

One heartbeat, in order: validate the request; leave if the epoch is -1 / -2; find or create
the group (a classic group is upgraded, online when it has members); find or create the
member (a static member takes over its instance's place) and check its
epoch (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID); apply its subscription changes, bumping the
group epoch when a subscription or the subscribed topics' metadata changed; run the assignor
when the group epoch is ahead of the target assignment epoch; reconcile the member one step;
re-arm its session. Records are appended before the response is released.
"""

from __future__ import annotations

from kmirror.coordinator.consumer_group import membership, migration, records
from kmirror.coordinator.consumer_group.group import ConsumerGroup
from kmirror.coordinator.consumer_group.member import ConsumerGroupMember, TopicPartitions
from kmirror.coordinator.consumer_group.messages import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    HeartbeatRequest,
    HeartbeatResult,
)
from kmirror.coordinator.consumer_group.ports import BROKER_DEFAULTS, GroupConfig, GroupsCore, TopicsView
from kmirror.coordinator.consumer_group.reconciliation import next_assignment
from kmirror.coordinator.consumer_group.state import MemberState
from kmirror.coordinator.consumer_group.target import update_member
from kmirror.coordinator.offsets import replay as classic_records
from kmirror.coordinator.results import GroupOutput
from kmirror.protocol.client_regex import InvalidClientRegex, compile_client_regex
from kmirror.protocol.errors import ErrorCode

E = ErrorCode


def validate(core: GroupsCore, req: HeartbeatRequest) -> tuple[ErrorCode, str] | None:
    """Kafka `throwIfConsumerGroupHeartbeatRequestIsInvalid`."""
    if not req.group_id:
        return E.invalid_request, "GroupId can't be empty."
    if req.version >= 1 and not req.member_id:
        return E.invalid_request, "MemberId can't be empty."
    if req.member_epoch == 0:
        if req.rebalance_timeout_ms == -1:
            return E.invalid_request, "RebalanceTimeoutMs must be provided in first request."
        if req.owned:
            return E.invalid_request, "TopicPartitions must be empty when (re-)joining."
        if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
            return E.invalid_request, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
    elif req.member_epoch == STATIC_LEAVE_EPOCH and req.instance_id is None:
        return E.invalid_request, "InstanceId can't be null."
    elif req.member_epoch < STATIC_LEAVE_EPOCH:
        return E.invalid_request, f"MemberEpoch is invalid: {req.member_epoch}."
    if req.server_assignor is not None and req.server_assignor not in core.config.group_consumer_assignors:
        return E.unsupported_assignor, f"ServerAssignor {req.server_assignor} is not supported."
    if req.subscribed_topic_regex:
        try:
            compile_client_regex(req.subscribed_topic_regex)
        except InvalidClientRegex as exc:
            return E.invalid_regular_expression, f"SubscribedTopicRegex {req.subscribed_topic_regex} is invalid: {exc}"
    return None


def heartbeat(
    core: GroupsCore, request_id: int, req: HeartbeatRequest, topics: TopicsView,
    group_config: GroupConfig = BROKER_DEFAULTS,
) -> GroupOutput:
    def reply(result: HeartbeatResult) -> GroupOutput:
        return GroupOutput(responses=[(request_id, result)])

    err = core.coordinator_error(req.group_id)
    if err is not None:
        return reply(HeartbeatResult(err))
    invalid = validate(core, req)
    if invalid is not None:
        return reply(HeartbeatResult(invalid[0], invalid[1]))
    if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        return membership.leave(core, request_id, req.group_id, req.member_id, req.member_epoch, req.instance_id)

    out = GroupOutput()
    out_records: list[records.Record] = []
    group = _group_for(core, req, topics, out_records, out)
    if isinstance(group, HeartbeatResult):
        return reply(group)
    found = _member_for(core, group, req, out_records)
    if isinstance(found, HeartbeatResult):
        if out_records:  # the group was created or converted in memory: store it all the same
            return out.extend(core.append(group.group_id, out_records, lambda: reply(found), lambda _e: reply(found)))
        return out.extend(reply(found))
    member, joined = found
    now = core.clock.monotonic_ms()
    created = member.member_id not in group.members

    updated = member.with_changes(
        instance_id=req.instance_id if req.instance_id is not None else member.instance_id,
        rack_id=req.rack_id if req.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms if req.rebalance_timeout_ms != -1 else member.rebalance_timeout_ms,
        subscribed_topic_names=(tuple(sorted(req.subscribed_topic_names))
                                if req.subscribed_topic_names is not None else member.subscribed_topic_names),
        subscribed_topic_regex=(req.subscribed_topic_regex or None
                                if req.subscribed_topic_regex is not None else member.subscribed_topic_regex),
        server_assignor=req.server_assignor if req.server_assignor is not None else member.server_assignor,
        client_id=req.client_id, client_host=req.client_host,
        classic=None,  # a member heartbeating uses the consumer protocol (a classic one restarted)
    )
    out_records.extend(update_member(group, member, updated, joined=joined, topics=topics, config=core.config,
                                     sensors=core.sensors))

    reconciled = next_assignment(
        updated, group.assignment_epoch, group.target.get(updated.member_id, {}), group.owner_of, req.owned
    )
    if reconciled != updated or created:
        out_records.append(records.current_assignment_record(group.group_id, reconciled))
    group.update_member(reconciled)
    _arm_revocation(group, updated, reconciled, now)
    session_ms = group_config.session_timeout_ms or core.config.group_consumer_session_timeout_ms
    group.session_deadline_ms[reconciled.member_id] = now + session_ms

    send_assignment = (
        req.member_epoch == 0
        or reconciled.assigned != member.assigned
        or (req.owned is not None and req.owned != reconciled.assigned)
    )
    result = HeartbeatResult(
        E.none, member_id=reconciled.member_id, member_epoch=reconciled.member_epoch,
        heartbeat_interval_ms=group_config.heartbeat_interval_ms or core.config.group_consumer_heartbeat_interval_ms,
        assignment=dict(reconciled.assigned) if send_assignment else None,
    )
    if not out_records:
        return out.extend(reply(result))
    return out.extend(core.append(
        group.group_id, out_records, lambda: reply(result),
        lambda e: reply(HeartbeatResult(membership.append_error(e))),
    ))


def _group_for(
    core: GroupsCore, req: HeartbeatRequest, topics: TopicsView, out_records: list[records.Record], out: GroupOutput
) -> ConsumerGroup | HeartbeatResult:
    """Kafka `getOrMaybeCreateConsumerGroup`: an empty classic group of that id is replaced by a
    consumer group keeping its offsets; one with members is upgraded online (`migration`)."""
    group = core.consumer_groups.get(req.group_id)
    if group is not None:
        return group
    if req.group_id in core.share_groups:
        return HeartbeatResult(E.group_id_not_found, f"Group {req.group_id} is not a consumer group.")
    classic = core.groups.get(req.group_id)
    if req.member_epoch != 0:
        return HeartbeatResult(E.unknown_member_id, f"Consumer group {req.group_id} not found.")
    if classic is not None and not classic.is_empty:
        upgraded = migration.upgrade(core, classic, topics, out)
        if isinstance(upgraded, str):
            return HeartbeatResult(E.group_id_not_found, upgraded)
        group, recs = upgraded
        out_records.extend(recs)
        return group
    group = ConsumerGroup(req.group_id)
    if classic is not None:
        group.offsets.update(classic.offsets)
        del core.groups[req.group_id]
        out_records.append(classic_records.group_tombstone(req.group_id))
    core.consumer_groups[req.group_id] = group
    return group


def _member_for(
    core: GroupsCore, group: ConsumerGroup, req: HeartbeatRequest, out: list[records.Record]
) -> tuple[ConsumerGroupMember, bool] | HeartbeatResult:
    """The member the heartbeat is for, and whether it joins the group now (a new member; a
    static member taking over its instance's place does not count as joining)."""
    if req.member_epoch == 0:
        if req.instance_id is not None and req.instance_id in group.static_members:
            replaced = membership.replace_static_member(group, req.instance_id, req.member_id or core.new_uuid(), out)
            return replaced if isinstance(replaced, HeartbeatResult) else (replaced, False)
        existing = group.members.get(req.member_id) if req.member_id else None
        if existing is not None:
            return existing, False
        if len(group.members) >= core.config.group_consumer_max_size:
            return HeartbeatResult(E.group_max_size_reached, f"The consumer group has reached its maximum capacity of "
                                   f"{core.config.group_consumer_max_size} members.")
        return ConsumerGroupMember(req.member_id or core.new_uuid()), True
    member = group.members.get(req.member_id)
    if member is None:
        return HeartbeatResult(E.unknown_member_id, f"Member {req.member_id} is not a member of group {group.group_id}.")
    if req.member_epoch > member.member_epoch:
        return HeartbeatResult(E.fenced_member_epoch, f"The consumer group member has a greater member epoch "
                               f"({req.member_epoch}) than the one known by the group coordinator ({member.member_epoch}).")
    if req.member_epoch < member.member_epoch and not (
        req.member_epoch == member.previous_member_epoch and _subset(req.owned, member.assigned)
    ):
        # Kafka accepts the previous epoch only when the member owns nothing new (a lost response).
        return HeartbeatResult(E.fenced_member_epoch, f"The consumer group member has a smaller member epoch "
                               f"({req.member_epoch}) than the one known by the group coordinator ({member.member_epoch}).")
    return member, False


def _subset(owned: TopicPartitions | None, assigned: TopicPartitions) -> bool:
    if owned is None:
        return False
    return all(ps <= assigned.get(t, frozenset()) for t, ps in owned.items())


def _arm_revocation(group: ConsumerGroup, before: ConsumerGroupMember, after: ConsumerGroupMember, now: int) -> None:
    """A member told to revoke has its rebalance timeout to do so, else it is fenced (Kafka
    `scheduleConsumerGroupRebalanceTimeout`)."""
    if after.state is not MemberState.UNREVOKED_PARTITIONS:
        group.revocation_deadline_ms.pop(after.member_id, None)
    elif before.state is not MemberState.UNREVOKED_PARTITIONS or after.member_id not in group.revocation_deadline_ms:
        group.revocation_deadline_ms[after.member_id] = now + max(after.rebalance_timeout_ms, 0)
