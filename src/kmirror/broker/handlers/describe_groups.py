"""DescribeGroups (key 15, v0-v6; unknown groups are GROUP_ID_NOT_FOUND from v6, KIP-1043).
A group without DESCRIBE is answered GROUP_AUTHORIZATION_FAILED (Kafka's authorization);
`authorized_operations` reports which of READ, DELETE and DESCRIBE the principal may do."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import DESCRIBE, GROUP
from kmirror.broker.services import BrokerServices
from kmirror.coordinator.results import DescribedGroup
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode

# Kafka's value when authorized operations were not requested.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
# READ (3), DELETE (6), DESCRIBE (8): what a group resource allows.
GROUP_OPERATION_CODES = (3, 6, 8)
GROUP_OPERATIONS = sum(1 << op for op in GROUP_OPERATION_CODES)


def group_operations(services: BrokerServices, ctx: RequestContext, group_id: str) -> int:
    """The `authorized_operations` bitfield of a group for this request."""
    if services.authorization.unrestricted(ctx):
        return GROUP_OPERATIONS
    return sum(1 << op for op in services.authorization.authorized_operations(ctx, GROUP, group_id,
                                                                              GROUP_OPERATION_CODES))


@api(15, "DescribeGroups", 0, 6)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    describable = services.authorization.filter(ctx, DESCRIBE, GROUP, request.groups)
    found = iter(services.groups.describe_groups([g for g in request.groups if g in describable],
                                                 missing_is_error=ctx.api_version >= 6))
    described = [next(found) if g in describable else DescribedGroup(g, ErrorCode.group_authorization_failed)
                 for g in request.groups]
    rt = ctx.response_type
    Group = nested(rt, "DescribedGroup")
    Member = nested(rt, "DescribedGroupMember")
    include_ops = bool(getattr(request, "include_authorized_operations", False))
    groups = tuple(
        build(
            Group,
            error_code=d.error,
            error_message=None if d.error == ErrorCode.none else d.error.name,
            group_id=d.group_id,
            group_state=d.state,
            protocol_type=d.protocol_type,
            protocol_data=d.protocol_data,
            members=tuple(
                build(Member, member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
                      client_host=m.client_host, member_metadata=m.metadata, member_assignment=m.assignment)
                for m in d.members
            ),
            authorized_operations=group_operations(services, ctx, d.group_id) if include_ops
            else AUTHORIZED_OPERATIONS_OMITTED,
        )
        for d in described
    )
    return build(rt, throttle_time=datetime.timedelta(0), groups=groups)
