"""DescribeAcls (key 29, v1-3, as Kafka 4, which removed v0): bindings matching one filter,
grouped by resource pattern."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.acls import AclFilter
from kmirror.metadata.controller.result import ApiError
from kmirror.protocol.entities import build, nested


@api(29, "DescribeAcls", 1, 3)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    acl_filter = AclFilter(
        int(request.resource_type_filter),
        request.resource_name_filter,
        int(request.pattern_type_filter),
        request.principal_filter,
        request.host_filter,
        int(request.operation),
        int(request.permission_type),
    )
    found = services.metadata.describe_acls(acl_filter)
    if isinstance(found, ApiError):
        return build(rt, throttle_time=datetime.timedelta(0), error_code=found.code, error_message=found.message,
                     resources=())
    resource_cls = nested(rt, "DescribeAclsResource")
    acl_cls = nested(rt, "AclDescription")
    grouped: dict[tuple[int, str, int], list[Any]] = {}
    for b in found:
        grouped.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
            build(acl_cls, principal=b.principal, host=b.host, operation=i8(b.operation),
                  permission_type=i8(b.permission_type))
        )
    resources = tuple(
        build(resource_cls, resource_type=i8(rtype), resource_name=name, pattern_type=i8(ptype), acls=tuple(acls))
        for (rtype, name, ptype), acls in grouped.items()
    )
    return build(rt, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, error_message=None,
                 resources=resources)
