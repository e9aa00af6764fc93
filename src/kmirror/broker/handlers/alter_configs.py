"""AlterConfigs (key 33, v0-2): the legacy API, whose config set replaces every dynamic
config of the resource."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import ALTER_CONFIGS
from kmirror.broker.config_authorization import authorized_config_change
from kmirror.broker.services import BrokerServices
from kmirror.metadata.image import ConfigResource
from kmirror.protocol.entities import build, nested


@api(33, "AlterConfigs", 0, 2, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    """ALTER_CONFIGS on each resource (`config_authorization`), then the change."""
    return await authorized_config_change(services, ctx, request, ALTER_CONFIGS, _alter)


async def _alter(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if services.metadata.forwarding:  # a broker-only node: the controller answers
        return await services.metadata.forward(request)
    rt = ctx.response_type
    changes = [
        (ConfigResource(int(r.resource_type), r.resource_name), {c.name: c.value for c in r.configs})
        for r in request.resources
    ]
    results = await services.metadata.alter_configs(changes, validate_only=bool(request.validate_only))
    cls = nested(rt, "AlterConfigsResourceResponse")
    out = tuple(
        build(
            cls,
            error_code=r.error.code,
            error_message=r.error.message if r.error.code != ErrorCode.none else None,
            resource_type=i8(r.resource.type),
            resource_name=r.resource.name,
        )
        for r in results
    )
    return build(rt, throttle_time=datetime.timedelta(0), responses=out)
