"""The target assignment of a consumer group (Kafka `TargetAssignmentBuilder`): which topics
the members subscribe to, whether that changed, and running the group's assignor when the
group epoch has moved past the target assignment epoch."""

from __future__ import annotations

import uuid
from collections import Counter

from kmirror.coordinator.config import CoordinatorConfig
from kmirror.coordinator.consumer_group import records
from kmirror.coordinator.consumer_group.assignors import ASSIGNORS, MemberSubscription
from kmirror.coordinator.consumer_group.group import ConsumerGroup
from kmirror.coordinator.consumer_group.member import ConsumerGroupMember
from kmirror.coordinator.consumer_group.ports import TopicsView
from kmirror.coordinator.group.sensors import GroupCoordinatorSensors, GroupSensor
from kmirror.protocol.client_regex import InvalidClientRegex, compile_client_regex


def is_internal(topic: str) -> bool:
    return topic.startswith("__")


def subscribed_topic_ids(member: ConsumerGroupMember, topics: TopicsView) -> frozenset[uuid.UUID]:
    """Topics named by the member that exist, and those its regex matches in full (internal
    topics are never matched by a regex, as in Kafka)."""
    ids = {topics[n].topic_id for n in member.subscribed_topic_names if n in topics}
    ids |= {topics[n].topic_id for n in regex_matches(member, topics)}
    return frozenset(ids)


def regex_matches(member: ConsumerGroupMember, topics: TopicsView) -> set[str]:
    """The topics the member's regex matches in full (never an internal topic)."""
    if not member.subscribed_topic_regex:
        return set()
    try:
        pattern = compile_client_regex(member.subscribed_topic_regex)
    except InvalidClientRegex:
        return set()
    return {name for name in topics if not is_internal(name) and pattern.fullmatch(name)}


def subscribed_topic_names(group: ConsumerGroup, topics: TopicsView) -> frozenset[str]:
    """Kafka `ModernGroup.subscribedTopicNames`: every topic a member names (existing or not)
    and every topic a member's regex matches now."""
    names: set[str] = set()
    for member in group.members.values():
        names.update(member.subscribed_topic_names)
        names |= regex_matches(member, topics)
    return frozenset(names)


def subscription_metadata(group: ConsumerGroup, topics: TopicsView) -> dict[uuid.UUID, int]:
    """topic id -> partition count, for every topic some member subscribes to."""
    wanted: set[uuid.UUID] = set()
    for m in group.members.values():
        wanted |= subscribed_topic_ids(m, topics)
    return {info.topic_id: info.partitions for info in topics.values() if info.topic_id in wanted}


def choose_assignor(group: ConsumerGroup, config: CoordinatorConfig) -> str:
    """The server assignor most members ask for (ties: the configured order), else the
    configured default (Kafka `defaultConsumerGroupAssignor` / `preferredServerAssignor`)."""
    votes = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
    if votes:
        best = max(votes.values())
        order = list(config.group_consumer_assignors)
        return min((a for a, c in votes.items() if c == best), key=lambda a: order.index(a) if a in order else 99)
    return config.group_consumer_assignors[0] if config.group_consumer_assignors else "uniform"


def update_member(
    group: ConsumerGroup, before: ConsumerGroupMember, after: ConsumerGroupMember, *, joined: bool,
    topics: TopicsView, config: CoordinatorConfig, sensors: GroupCoordinatorSensors,
) -> list[records.Record]:
    """Put `after` in the group in place of `before` (Kafka `hasMemberSubscriptionChanged`,
    `updateSubscriptionMetadata`, `updateTargetAssignment`): the group epoch is bumped when a
    member `joined` (a new member, not a static member taking over its instance's place) or
    changed its subscription, or when the subscribed topics' partition counts changed; the
    target assignment is recomputed while the group epoch is ahead of it (a bump is one
    `consumer-group-rebalance`). The records of it."""
    out: list[records.Record] = []
    bump = joined or after.subscription_key() != before.subscription_key()
    if after.member_id not in group.members or after != before:
        out.append(records.member_metadata_record(group.group_id, after))
    group.update_member(after)
    metadata = subscription_metadata(group, topics)
    if group.subscribed_metadata is None and group.target_covers(metadata):
        group.subscribed_metadata = metadata  # after a load: the stored target already matches
    if metadata != group.subscribed_metadata:
        group.subscribed_metadata = metadata
        bump = True
    if bump:
        group.group_epoch += 1
        out.append(records.epoch_record(records.GROUP_METADATA, group.group_id, group.group_epoch))
        sensors.record(GroupSensor.CONSUMER_GROUP_REBALANCES)
    if group.group_epoch > group.assignment_epoch:
        out.extend(update_target(group, topics, config))
    return out


def update_target(group: ConsumerGroup, topics: TopicsView, config: CoordinatorConfig) -> list[records.Record]:
    """Recompute the target assignment at the group epoch; the records of what changed."""
    name = choose_assignor(group, config)
    members = [MemberSubscription(m.member_id, subscribed_topic_ids(m, topics))
               for m in sorted(group.members.values(), key=lambda m: m.member_id)]
    new = ASSIGNORS[name].assign(members, group.subscribed_metadata or {}, group.target)
    out: list[records.Record] = []
    for member_id, tps in new.items():
        if group.target.get(member_id) != tps:
            out.append(records.target_member_record(group.group_id, member_id, tps))
    group.target = new
    group.assignment_epoch = group.group_epoch
    group.assignor_name = name
    out.append(records.epoch_record(records.TARGET_METADATA, group.group_id, group.assignment_epoch))
    return out
