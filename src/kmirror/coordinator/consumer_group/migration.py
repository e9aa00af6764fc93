"""Online migration of a live group between the classic protocol and the consumer protocol
(KIP-848), as Kafka 4 does it (`GroupMetadataManager.convertToConsumerGroup` /
`convertToClassicGroup`, `ConsumerGroup.fromClassicGroup`, `ClassicGroup.fromConsumerGroup`):

- **Upgrade.** The first ConsumerGroupHeartbeat (epoch 0) for a classic group with members
  turns it into a consumer group. Each classic member becomes a member at the group's
  generation with the partitions of its last SyncGroup as its assignment and its target,
  keeping its JoinGroup session timeout and protocols (`ClassicMemberMetadata`). The classic
  group's waiting JoinGroup/SyncGroup requests are answered REBALANCE_IN_PROGRESS; its members
  go on through JoinGroup, SyncGroup and Heartbeat against the consumer group (`classic_join`,
  `classic_members`) until they restart with the consumer protocol.
- **Downgrade.** When members leave or are fenced and every member left uses the classic
  protocol, the consumer group turns back into a classic group at its group epoch, each member
  holding the partitions it may own, and a rebalance starts (the classic protocol takes over).

Two choices differ from Kafka, both so that no partition is ever owned by two members when a
group converts while members have not caught up (found by
tests/property/test_consumer_group_migration.py): the upgrade keeps, pending revocation, the
partitions a cooperative member reported owning at its last JoinGroup and was not given again
(its SyncGroup answer may not be applied yet: the cooperative protocol would not hand them to
anyone before it rejoins); the downgrade stores each member's current assignment and pending
revocations rather than its target (which may name partitions another member still owns).

`group.consumer.migration.policy` (`bidirectional`, `upgrade`, `downgrade`, `disabled`) says which
directions are allowed; conversions of empty groups are not governed by it
(`coexistence`). A refused upgrade is GROUP_ID_NOT_FOUND with Kafka's reason; a refused
downgrade leaves a consumer group of classic members, which works on.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable

from kmirror.coordinator.consumer_group import records
from kmirror.coordinator.consumer_group.group import ConsumerGroup
from kmirror.coordinator.consumer_group.member import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    TopicPartitions,
)
from kmirror.coordinator.consumer_group.ports import GroupsCore, TopicsView, topic_names
from kmirror.coordinator.consumer_group.state import MemberState
from kmirror.coordinator.consumer_group.target import subscription_metadata
from kmirror.coordinator.group.group import ClassicGroup
from kmirror.coordinator.group.member import MemberMetadata
from kmirror.coordinator.group.state import GroupState
from kmirror.coordinator.offsets import replay as classic_records
from kmirror.coordinator.results import GroupOutput
from kmirror.protocol.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerProtocolError,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    protocol_version,
)
from kmirror.protocol.errors import ErrorCode

E = ErrorCode

# policy -> (upgrade allowed, downgrade allowed) (Kafka `ConsumerGroupMigrationPolicy`)
POLICIES = {
    "bidirectional": (True, True),
    "upgrade": (True, False),
    "downgrade": (False, True),
    "disabled": (False, False),
}


def upgrade_enabled(policy: str) -> bool:
    return POLICIES.get(policy.lower(), (False, False))[0]


def downgrade_enabled(policy: str) -> bool:
    return POLICIES.get(policy.lower(), (False, False))[1]


# ---- upgrade: classic -> consumer ---------------------------------------------------------


def upgrade(
    core: GroupsCore, classic: ClassicGroup, topics: TopicsView, out: GroupOutput
) -> tuple[ConsumerGroup, list[records.Record]] | str:
    """The consumer group replacing `classic` and the records that store the change (the
    classic group's tombstone first), or why it may not (Kafka `validateOnlineUpgrade` and the
    conversion's failures, the message of a GROUP_ID_NOT_FOUND). On success the core holds the
    new group and `out` has the classic group's waiters answered REBALANCE_IN_PROGRESS."""
    gid = classic.group_id
    if not upgrade_enabled(core.config.group_consumer_migration_policy):
        return f"Cannot upgrade classic group {gid} to consumer group because online upgrade is disabled."
    if classic.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return (f"Cannot upgrade classic group {gid} to consumer group because the group does not use "
                f"the consumer embedded protocol.")
    if len(classic.members) > core.config.group_consumer_max_size:
        return (f"Cannot upgrade classic group {gid} to consumer group because the group size exceeds "
                f"the consumer group maximum size.")
    group = ConsumerGroup(gid, group_epoch=classic.generation_id, assignment_epoch=classic.generation_id)
    members = []
    for classic_member in classic.members.values():
        member = _from_classic_member(classic, classic_member, topics)
        if isinstance(member, str):
            return member
        members.append(member)
    assigned = [(t, p) for m in members for t, ps in m.assigned.items() for p in ps]
    if len(assigned) != len(set(assigned)):
        return f"Cannot upgrade classic group {gid} to consumer group because its members' assignments overlap."
    taken = set(assigned)
    for member in members:
        # what it reported owning at its last JoinGroup and was not given again stays its own,
        # pending revocation, until it rejoins without it (unless another member was given it)
        pending: dict[uuid.UUID, frozenset[int]] = {}
        for t, ps in member.pending_revocation.items():
            free = frozenset(p for p in ps if (t, p) not in taken)
            taken |= {(t, p) for p in free}
            if free:
                pending[t] = free
        member = member.with_changes(
            pending_revocation=pending, state=MemberState.UNREVOKED_PARTITIONS if pending else MemberState.STABLE)
        group.target[member.member_id] = dict(member.assigned)
        group.update_member(member)
    group.subscribed_metadata = subscription_metadata(group, topics)
    group.offsets.update(classic.offsets)

    recs: list[records.Record] = [classic_records.group_tombstone(gid)]
    recs.extend(records.member_metadata_record(gid, m) for m in group.members.values())
    recs.append(records.epoch_record(records.GROUP_METADATA, gid, group.group_epoch))
    recs.extend(records.target_member_record(gid, mid, tps) for mid, tps in group.target.items())
    recs.append(records.epoch_record(records.TARGET_METADATA, gid, group.assignment_epoch))
    recs.extend(records.current_assignment_record(gid, m) for m in group.members.values())

    out.extend(core.fail_classic_waiters(classic, E.rebalance_in_progress))
    del core.groups[gid]
    core.consumer_groups[gid] = group
    now = core.clock.monotonic_ms()
    for m in group.members.values():
        assert m.classic is not None
        group.session_deadline_ms[m.member_id] = now + m.classic.session_timeout_ms
    return group, recs


def _from_classic_member(
    classic: ClassicGroup, member: MemberMetadata, topics: TopicsView
) -> ConsumerGroupMember | str:
    gid = classic.group_id
    malformed = (f"Cannot upgrade classic group {gid} to consumer group because the embedded consumer "
                 f"protocol is malformed.")
    # a group still in its first rebalance has no protocol yet: every protocol a member offers
    # carries the same subscription
    metadata = (member.metadata_for(classic.protocol_name) if classic.protocol_name is not None
                else member.protocols[0].metadata if member.protocols else b"")
    try:
        subscription = decode_subscription(metadata)
        assignment = decode_assignment(member.assignment) if member.assignment else None
    except ConsumerProtocolError:
        return malformed
    if assignment is not None and assignment.user_data:
        return (f"Cannot upgrade classic group {gid} to consumer group because an unsupported custom "
                f"assignor is in use. Please refer to the documentation or switch to a default assignor "
                f"before re-attempting the upgrade.")
    tps = _by_topic_id(assignment.partitions if assignment is not None else (), topics)
    owned = _by_topic_id(subscription.owned_partitions, topics)
    pending = {t: ps - tps.get(t, frozenset()) for t, ps in owned.items() if ps - tps.get(t, frozenset())}
    return ConsumerGroupMember(
        member.member_id, instance_id=member.group_instance_id, rack_id=subscription.rack_id,
        client_id=member.client_id, client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(set(subscription.topics))),
        rebalance_timeout_ms=member.rebalance_timeout_ms,
        member_epoch=classic.generation_id, previous_member_epoch=classic.generation_id,
        state=MemberState.STABLE, assigned=tps, pending_revocation=pending,
        classic=ClassicMemberMetadata(member.session_timeout_ms, member.protocols),
    )


def _by_topic_id(partitions: Iterable[tuple[str, Iterable[int]]], topics: TopicsView) -> TopicPartitions:
    """Partitions by topic name to partitions by topic id; topics the cluster no longer has are
    left out (Kafka `toTopicPartitionMap`)."""
    out: dict[uuid.UUID, set[int]] = {}
    for topic, ps in partitions:
        info = topics.get(topic)
        if info is not None:
            out.setdefault(info.topic_id, set()).update(ps)
    return {t: frozenset(ps) for t, ps in out.items() if ps}


# ---- downgrade: consumer -> classic -------------------------------------------------------


def can_downgrade(core: GroupsCore, group: ConsumerGroup, leaving: Collection[str]) -> bool:
    """Kafka `validateOnlineDowngradeWithFencedMembers` / `...WithReplacedMember`: the members
    that stay all use the classic protocol, there is at least one, the policy allows it, the
    classic group would not be over `group.max.size`, and they share a protocol."""
    staying = [m for mid, m in group.members.items() if mid not in leaving]
    return (
        bool(staying)
        and all(m.classic is not None for m in staying)
        and downgrade_enabled(core.config.group_consumer_migration_policy)
        and len(staying) <= core.config.group_max_size
        and _common_protocol(staying)
    )


def _common_protocol(members: list[ConsumerGroupMember]) -> bool:
    names: set[str] | None = None
    for m in members:
        assert m.classic is not None
        names = m.classic.protocol_names() if names is None else names & m.classic.protocol_names()
    return bool(names)


def downgrade(
    core: GroupsCore, group: ConsumerGroup, leaving: Collection[str], out: GroupOutput, *, rebalance: bool = True
) -> list[records.Record]:
    """Replace `group` by a classic group of the members not `leaving` (the caller checked
    `can_downgrade`): the records tombstone every consumer-group record of the group and store
    the classic group; a rebalance starts when `rebalance` (a member left, or a static member's
    replacement changed the subscription or came before the group was reconciled)."""
    gid = group.group_id
    recs = [records.tombstone(records.CURRENT_ASSIGNMENT, gid, m) for m in group.members]
    recs.extend(records.tombstone(records.TARGET_MEMBER, gid, m) for m in group.members)
    recs.append(records.tombstone(records.TARGET_METADATA, gid))
    recs.extend(records.tombstone(records.MEMBER_METADATA, gid, m) for m in group.members)
    recs.append(records.tombstone(records.GROUP_METADATA, gid))

    classic = ClassicGroup(gid, state=GroupState.STABLE, state_timestamp_ms=core.clock.now_ms(),
                           generation_id=group.group_epoch, protocol_type=CONSUMER_PROTOCOL_TYPE)
    for m in group.members.values():
        if m.member_id in leaving:
            continue
        assert m.classic is not None
        classic.add_member(MemberMetadata(
            m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
            m.classic.session_timeout_ms, CONSUMER_PROTOCOL_TYPE, m.classic.supported_protocols,
        ))
    classic.protocol_name = classic.select_protocol()
    names = topic_names(core.topics())
    for cm in classic.members.values():
        # what the member may own now, not its target (Kafka's choice): until it rejoins it may
        # still hold partitions pending revocation, and a target may name partitions another
        # member has not released yet
        may_own: dict[str, set[int]] = {}
        for t, p in group.members[cm.member_id].owned():
            if t in names:
                may_own.setdefault(names[t], set()).add(p)
        try:
            version = protocol_version(cm.metadata_for(classic.protocol_name))
        except ConsumerProtocolError:
            version = 0
        cm.assignment = encode_assignment(may_own, version)
    classic.offsets.update(group.offsets)
    recs.append(classic_records.group_metadata_record(classic))

    del core.consumer_groups[gid]
    core.groups[gid] = classic
    now = core.clock.monotonic_ms()
    for cm in classic.members.values():
        classic.heartbeat_deadline_ms[cm.member_id] = now + cm.session_timeout_ms
    if rebalance:
        core.prepare_rebalance(classic, out)
    return recs
