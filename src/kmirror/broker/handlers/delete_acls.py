"""DeleteAcls (key 31, v1-3, as Kafka 4, which removed v0): per filter, the bindings it removed."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import ALTER
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.acls import AclFilter
from kmirror.protocol.entities import build, nested


@api(31, "DeleteAcls", 1, 3, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    if not services.authorization.authorize_cluster(ctx, ALTER):  # Kafka: ALTER on the cluster
        refused = build(nested(rt, "DeleteAclsFilterResult"), error_code=ErrorCode.cluster_authorization_failed,
                        error_message="Cluster authorization failed.", matching_acls=())
        return build(rt, throttle_time=datetime.timedelta(0), filter_results=tuple(refused for _ in request.filters))
    if services.metadata.forwarding:  # a broker-only node: the controller answers
        return await services.metadata.forward(request)
    filters = [
        AclFilter(
            int(f.resource_type_filter),
            f.resource_name_filter,
            int(f.pattern_type_filter),
            f.principal_filter,
            f.host_filter,
            int(f.operation),
            int(f.permission_type),
        )
        for f in request.filters
    ]
    results = await services.metadata.delete_acls(filters)
    result_cls = nested(rt, "DeleteAclsFilterResult")
    match_cls = nested(rt, "DeleteAclsMatchingAcl")
    out = []
    for r in results:
        matching = tuple(
            build(
                match_cls,
                error_code=ErrorCode.none,
                error_message=None,
                resource_type=i8(b.resource_type),
                resource_name=b.resource_name,
                pattern_type=i8(b.pattern_type),
                principal=b.principal,
                host=b.host,
                operation=i8(b.operation),
                permission_type=i8(b.permission_type),
            )
            for b in r.deleted
        )
        ok = r.error.code == ErrorCode.none
        out.append(build(result_cls, error_code=r.error.code, error_message=None if ok else r.error.message,
                         matching_acls=matching))
    return build(rt, throttle_time=datetime.timedelta(0), filter_results=tuple(out))
