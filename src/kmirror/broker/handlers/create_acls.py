"""CreateAcls (key 30, v1-3, as Kafka 4, which removed v0). Bindings are stored in the metadata log;
the StandardAuthorizer (`authorizer.class.name`, docs/design/security.md) enforces them."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import ALTER
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.acls import AclCreation
from kmirror.protocol.entities import build, nested


@api(30, "CreateAcls", 1, 3, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    if not services.authorization.authorize_cluster(ctx, ALTER):  # Kafka: ALTER on the cluster
        cls = nested(rt, "AclCreationResult")
        refused = build(cls, error_code=ErrorCode.cluster_authorization_failed, error_message="Cluster authorization failed.")
        return build(rt, throttle_time=datetime.timedelta(0), results=tuple(refused for _ in request.creations))
    if services.metadata.forwarding:  # a broker-only node: the controller answers
        return await services.metadata.forward(request)
    creations = [
        AclCreation(
            int(c.resource_type),
            c.resource_name,
            int(c.resource_pattern_type),
            c.principal,
            c.host,
            int(c.operation),
            int(c.permission_type),
        )
        for c in request.creations
    ]
    errors = await services.metadata.create_acls(creations)
    cls = nested(rt, "AclCreationResult")
    results = tuple(
        build(cls, error_code=e.code, error_message=e.message if e.code != ErrorCode.none else None) for e in errors
    )
    return build(rt, throttle_time=datetime.timedelta(0), results=results)
