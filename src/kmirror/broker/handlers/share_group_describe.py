"""ShareGroupDescribe (key 77, v1; KIP-932). A group that is not a share group, or that does
not exist, is GROUP_ID_NOT_FOUND. A group without DESCRIBE is answered
GROUP_AUTHORIZATION_FAILED (Kafka's authorization)."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.handlers.consumer_group_describe import assignment_builder, describe_authorized
from kmirror.broker.handlers.describe_groups import AUTHORIZED_OPERATIONS_OMITTED, group_operations
from kmirror.broker.services import BrokerServices
from kmirror.coordinator.share_group.admin import DescribedShareGroup
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


@api(77, "ShareGroupDescribe", 1, 1)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    described = describe_authorized(
        services, ctx, request.group_ids, services.groups.share_group_describe,
        lambda g: DescribedShareGroup(g, ErrorCode.group_authorization_failed, "Group authorization failed."))
    rt = ctx.response_type
    Group = nested(rt, "DescribedGroup")
    Member = nested(rt, "Member")
    assignment = assignment_builder(services, rt)

    groups = tuple(
        build(Group, error_code=d.error, error_message=d.error_message, group_id=d.group_id, group_state=d.state,
              group_epoch=d.group_epoch, assignment_epoch=d.assignment_epoch, assignor_name=d.assignor_name,
              members=tuple(
                  build(Member, member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                        client_id=m.client_id, client_host=m.client_host,
                        subscribed_topic_names=m.subscribed_topic_names, assignment=assignment(m.assignment))
                  for m in d.members),
              authorized_operations=group_operations(services, ctx, d.group_id)
              if request.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED)
        for d in described)
    return build(rt, throttle_time=datetime.timedelta(0), groups=groups)
