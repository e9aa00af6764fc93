"""ConsumerGroupDescribe, ListGroups entries, DeleteGroups and offset-commit validation for
consumer groups (Kafka `ConsumerGroup.asDescribedGroup`, `validateOffsetCommit`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kmirror.coordinator.consumer_group import records
from kmirror.coordinator.consumer_group.group import ConsumerGroup
from kmirror.coordinator.consumer_group.member import ConsumerGroupMember, TopicPartitions
from kmirror.coordinator.consumer_group.ports import GroupsCore
from kmirror.coordinator.offsets import replay as classic_records
from kmirror.coordinator.results import ListedGroup
from kmirror.protocol.errors import ErrorCode

E = ErrorCode
CONSUMER_PROTOCOL_TYPE = "consumer"
CLASSIC_MEMBER_TYPE, CONSUMER_MEMBER_TYPE = 0, 1


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: TopicPartitions
    target_assignment: TopicPartitions
    # ConsumerGroupDescribe v1 MemberType: 0 a classic member (online migration), 1 a consumer member
    member_type: int = 1


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    group_id: str
    error: ErrorCode
    error_message: str | None = None
    state: str = "Dead"
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()


def describe(core: GroupsCore, group_id: str) -> DescribedConsumerGroup:
    err = core.coordinator_error(group_id)
    if err is not None:
        return DescribedConsumerGroup(group_id, err)
    group = core.consumer_groups.get(group_id)
    if group is None:
        message = (f"Group {group_id} is not a consumer group." if group_id in core.groups
                   else f"Group {group_id} not found.")
        return DescribedConsumerGroup(group_id, E.group_id_not_found, message)
    members = tuple(
        DescribedConsumerMember(
            m.member_id, m.instance_id, m.rack_id, m.member_epoch, m.client_id, m.client_host,
            m.subscribed_topic_names, m.subscribed_topic_regex, m.assigned, group.target.get(m.member_id, {}),
            CLASSIC_MEMBER_TYPE if m.uses_classic_protocol else CONSUMER_MEMBER_TYPE,
        )
        for m in group.members.values()
    )
    return DescribedConsumerGroup(
        group_id, E.none, None, str(group.state), group.group_epoch, group.assignment_epoch,
        group.assignor_name or (core.config.group_consumer_assignors or ("uniform",))[0], members,
    )


def listed(group: ConsumerGroup) -> ListedGroup:
    return ListedGroup(group.group_id, CONSUMER_PROTOCOL_TYPE, str(group.state), "consumer")


def delete(core: GroupsCore, group_id: str) -> tuple[ErrorCode, list[records.Record]]:
    """DeleteGroups of a consumer group: only an empty one; its offsets and records go."""
    group = core.consumer_groups[group_id]
    if not group.is_empty:
        return E.non_empty_group, []
    recs = [classic_records.offset_commit_record(group_id, tp, None) for tp in sorted(group.offsets)]
    recs.extend(records.group_tombstones(group_id))
    del core.consumer_groups[group_id]
    return E.none, recs


def validate_offset_commit(group: ConsumerGroup, member_id: str, member_epoch: int) -> ErrorCode:
    """Kafka `ConsumerGroup.validateOffsetCommit`: an admin commit (epoch < 0) only while the
    group is empty; a member's commit must carry its current member epoch (a classic member's
    generation is its member epoch)."""
    if member_epoch < 0 and group.is_empty:
        return E.none
    member = group.members.get(member_id)
    if member is None:
        return E.unknown_member_id
    return _validate_member_epoch(member, member_epoch)


def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> ErrorCode:
    """Kafka `ConsumerGroup.validateOffsetFetch`: a fetch naming a member (OffsetFetch v9)
    must carry its current epoch; one without a member (admin tools) is always allowed."""
    if member_epoch < 0 and not member_id:
        return E.none
    member = group.members.get(member_id or "")
    if member is None:
        return E.unknown_member_id
    return _validate_member_epoch(member, member_epoch)


def _validate_member_epoch(member: ConsumerGroupMember, epoch: int) -> ErrorCode:
    """Kafka `validateMemberEpoch`: ILLEGAL_GENERATION for a classic member, else STALE_MEMBER_EPOCH."""
    if epoch == member.member_epoch:
        return E.none
    return E.illegal_generation if member.uses_classic_protocol else E.stale_member_epoch


def validate_txn_offset_commit(group: ConsumerGroup, member_id: str, member_epoch: int) -> ErrorCode:
    """TxnOffsetCommit for a consumer group: a producer without the consumer's group metadata
    (member "" and generation -1) is accepted; otherwise the member must be current."""
    if member_epoch < 0 and not member_id:
        return E.none
    return validate_offset_commit(group, member_id, member_epoch)


def to_topic_names(tps: TopicPartitions, names: dict[uuid.UUID, str]) -> list[tuple[uuid.UUID, str, list[int]]]:
    return [(t, names.get(t, ""), sorted(ps)) for t, ps in sorted(tps.items(), key=lambda kv: str(kv[0]))]
