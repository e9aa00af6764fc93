"""JoinGroup of a classic consumer to a consumer group with members (Kafka
`GroupMetadataManager.classicGroupJoinToConsumerGroup`): during an online migration the group's
classic members are consumer-group members that speak JoinGroup, SyncGroup and Heartbeat.

A JoinGroup is a full heartbeat with the subscription of its `consumer` protocol metadata: the
member is created or updated (a static member takes over its instance's place), the group epoch
and the target assignment move as for a ConsumerGroupHeartbeat, and the member reconciles one
step, the partitions its subscription says it owns standing for the heartbeat's. It is answered
at once (no join barrier) with its member epoch as the generation and its own first protocol;
SyncGroup then hands out its assigned partitions (`classic_members`). A static member replacing
the last member of the consumer protocol downgrades the group (`migration`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kmirror.coordinator.consumer_group import membership, migration, records
from kmirror.coordinator.consumer_group.group import ConsumerGroup
from kmirror.coordinator.consumer_group.member import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    TopicPartitions,
)
from kmirror.coordinator.consumer_group.ports import GroupsCore, TopicsView
from kmirror.coordinator.consumer_group.reconciliation import next_assignment
from kmirror.coordinator.consumer_group.state import ConsumerGroupState
from kmirror.coordinator.consumer_group.target import update_member
from kmirror.coordinator.group.member import Protocol
from kmirror.coordinator.results import GroupOutput, JoinResult
from kmirror.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolError,
    ConsumerSubscription,
    decode_subscription,
)
from kmirror.protocol.errors import ErrorCode

E = ErrorCode


@dataclass(frozen=True, slots=True)
class ClassicJoin:
    """A JoinGroup request as the consumer group sees it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    require_known_member_id: bool


def join(core: GroupsCore, request_id: int, group: ConsumerGroup, req: ClassicJoin) -> GroupOutput:
    def reply(result: JoinResult) -> GroupOutput:
        return GroupOutput(responses=[(request_id, result)])

    unknown = not req.member_id
    member_id = req.member_id or core.new_uuid()
    if len(group.members) >= core.config.group_consumer_max_size and member_id not in group.members:
        return reply(JoinResult(E.group_max_size_reached, member_id=req.member_id))
    if not group.supports_classic_protocols(req.protocol_type, {p.name for p in req.protocols}):
        return reply(JoinResult(E.inconsistent_group_protocol, member_id=req.member_id))
    if unknown and req.require_known_member_id and req.group_instance_id is None:
        # KIP-394: the member joins again with this id (a consumer group holds no pending ids)
        return reply(JoinResult(E.member_id_required, member_id=member_id))
    try:
        subscription = decode_subscription(req.protocols[0].metadata)
    except ConsumerProtocolError:
        return reply(JoinResult(E.inconsistent_group_protocol, member_id=req.member_id))

    out_records: list[records.Record] = []
    found = _member_for(group, req, member_id, unknown, out_records)
    if isinstance(found, JoinResult):
        return reply(found)
    member, joined, replaced = found
    topics = core.topics()
    created = member.member_id not in group.members
    updated = member.with_changes(
        instance_id=req.group_instance_id if req.group_instance_id is not None else member.instance_id,
        rack_id=subscription.rack_id if subscription.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms,
        subscribed_topic_names=tuple(sorted(set(subscription.topics))),
        subscribed_topic_regex=None,  # a classic member subscribes to names
        client_id=req.client_id, client_host=req.client_host,
        classic=ClassicMemberMetadata(req.session_timeout_ms, req.protocols),
    )
    epoch_before = group.group_epoch
    out_records.extend(update_member(group, member, updated, joined=joined, topics=topics, config=core.config,
                                     sensors=core.sensors))
    reconciled = next_assignment(updated, group.assignment_epoch, group.target.get(updated.member_id, {}),
                                 group.owner_of, _owned(subscription, topics))
    if reconciled != updated or created:
        out_records.append(records.current_assignment_record(group.group_id, reconciled))
    group.update_member(reconciled)
    result = JoinResult(E.none, reconciled.member_epoch, CONSUMER_PROTOCOL_TYPE,
                        req.protocols[0].name, "", reconciled.member_id)

    out = GroupOutput()
    # Kafka `validateOnlineDowngradeWithReplacedMember`: it replaced the last member of the
    # consumer protocol; a rebalance follows if the subscription changed, or (kmirror) if the
    # group had not finished reconciling, for the classic group to assign what is still moving
    if replaced is not None and not replaced.uses_classic_protocol and migration.can_downgrade(core, group, ()):
        rebalance = group.group_epoch != epoch_before or group.state is not ConsumerGroupState.STABLE
        out_records.extend(migration.downgrade(core, group, (), out, rebalance=rebalance))
        classic = core.groups[group.group_id]
        result = JoinResult(E.none, classic.generation_id, CONSUMER_PROTOCOL_TYPE, classic.protocol_name, "",
                            reconciled.member_id)
    else:
        now = core.clock.monotonic_ms()
        group.join_deadline_ms.pop(reconciled.member_id, None)
        group.session_deadline_ms[reconciled.member_id] = now + req.session_timeout_ms
        group.sync_deadline_ms[reconciled.member_id] = now + req.rebalance_timeout_ms
    if not out_records:  # a rejoin that changed nothing
        return out.extend(reply(result))
    return out.extend(core.append(group.group_id, out_records, lambda: reply(result),
                                  lambda e: reply(JoinResult(membership.append_error(e), member_id=member_id))))


def _member_for(
    group: ConsumerGroup, req: ClassicJoin, member_id: str, unknown: bool, out: list[records.Record]
) -> tuple[ConsumerGroupMember, bool, ConsumerGroupMember | None] | JoinResult:
    """Kafka `getOrMaybeSubscribe{Dynamic,Static}ConsumerGroupMember` for a classic member: the
    member, whether it joins the group now, and the static member it replaces (if any)."""
    instance_id = req.group_instance_id
    if instance_id is None:
        existing = group.members.get(member_id)
        return (existing, False, None) if existing is not None else (ConsumerGroupMember(member_id), True, None)
    holder_id = group.static_members.get(instance_id)
    if not unknown:
        if holder_id is None:
            return JoinResult(E.unknown_member_id, member_id=req.member_id)
        if holder_id != member_id:
            return JoinResult(E.fenced_instance_id, member_id=req.member_id)
        return group.members[holder_id], False, None
    if holder_id is None:
        return ConsumerGroupMember(member_id), True, None
    # A restarted static member takes its instance's place whatever protocol the old one used.
    old = group.members[holder_id]
    replaced = membership.replace_static_member(group, instance_id, member_id, out, by_classic_member=True)
    assert isinstance(replaced, ConsumerGroupMember)
    return replaced, False, old


def _owned(subscription: ConsumerSubscription, topics: TopicsView) -> TopicPartitions:
    """The subscription's owned partitions by topic id (topics the cluster no longer has are
    left out, as Kafka's `toTopicPartitions`)."""
    owned: dict[uuid.UUID, set[int]] = {}
    for topic, partitions in subscription.owned_partitions:
        info = topics.get(topic)
        if info is not None:
            owned.setdefault(info.topic_id, set()).update(partitions)
    return {t: frozenset(ps) for t, ps in owned.items() if ps}
