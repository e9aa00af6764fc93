"""ConsumerGroupDescribe (key 69, v0-v1; KIP-848). A classic group, or one that does not
exist, is GROUP_ID_NOT_FOUND (clients then fall back to DescribeGroups, as with Kafka). v1's
MemberType tells the classic members of a group being migrated online (0) from the others (1).
A group without DESCRIBE is answered GROUP_AUTHORIZATION_FAILED (Kafka's authorization)."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import DESCRIBE, GROUP
from kmirror.broker.handlers.describe_groups import AUTHORIZED_OPERATIONS_OMITTED, group_operations
from kmirror.broker.services import BrokerServices
from kmirror.coordinator.consumer_group.admin import DescribedConsumerGroup
from kmirror.coordinator.consumer_group.member import TopicPartitions
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode

G = TypeVar("G")


def describe_authorized(services: BrokerServices, ctx: RequestContext, group_ids: Sequence[str],
                        describe: Callable[[list[str]], list[G]], refused: Callable[[str], G]) -> list[G]:
    """`describe` of the groups the principal may DESCRIBE, `refused(group_id)` for the others,
    in request order."""
    describable = services.authorization.filter(ctx, DESCRIBE, GROUP, group_ids)
    found = iter(describe([g for g in group_ids if g in describable]))
    return [next(found) if g in describable else refused(g) for g in group_ids]


def assignment_builder(services: BrokerServices, rt: type) -> Callable[[TopicPartitions], Any]:
    """Builds a response's `Assignment` (topic ids with their names from the metadata image)."""
    image = getattr(services.metadata, "image", None)
    names: dict[uuid.UUID, str] = {t.topic_id: n for n, t in image.topics.items()} if image is not None else {}
    Assignment, TopicPartitionsEntity = nested(rt, "Assignment"), nested(rt, "TopicPartitions")

    def assignment(tps: TopicPartitions) -> Any:
        return build(Assignment, topic_partitions=tuple(
            build(TopicPartitionsEntity, topic_id=t, topic_name=names.get(t, ""), partitions=tuple(sorted(ps)))
            for t, ps in sorted(tps.items(), key=lambda kv: str(kv[0]))
        ))
    return assignment


@api(69, "ConsumerGroupDescribe", 0, 1)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    described = describe_authorized(
        services, ctx, request.group_ids, services.groups.consumer_group_describe,
        lambda g: DescribedConsumerGroup(g, ErrorCode.group_authorization_failed, "Group authorization failed."))
    rt = ctx.response_type
    Group = nested(rt, "DescribedGroup")
    Member = nested(rt, "Member")
    assignment = assignment_builder(services, rt)

    groups = tuple(
        build(
            Group,
            error_code=d.error,
            error_message=d.error_message,
            group_id=d.group_id,
            group_state=d.state,
            group_epoch=d.group_epoch,
            assignment_epoch=d.assignment_epoch,
            assignor_name=d.assignor_name,
            members=tuple(
                build(Member, member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                      member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                      subscribed_topic_names=m.subscribed_topic_names,
                      subscribed_topic_regex=m.subscribed_topic_regex,
                      assignment=assignment(m.assignment), target_assignment=assignment(m.target_assignment),
                      member_type=m.member_type)
                for m in d.members
            ),
            authorized_operations=group_operations(services, ctx, d.group_id)
            if request.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED,
        )
        for d in described
    )
    return build(rt, throttle_time=datetime.timedelta(0), groups=groups)
