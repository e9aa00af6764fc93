"""IncrementalAlterConfigs (key 44, v0-1): SET / DELETE / APPEND / SUBTRACT per key."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import ALTER_CONFIGS
from kmirror.broker.config_authorization import authorized_config_change
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.configs import AlterableConfig, AlterConfigOp
from kmirror.metadata.controller.result import ApiError
from kmirror.metadata.image import ConfigResource
from kmirror.protocol.entities import build, nested


@api(44, "IncrementalAlterConfigs", 0, 1, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    """ALTER_CONFIGS on each resource (`config_authorization`), then the change."""
    return await authorized_config_change(services, ctx, request, ALTER_CONFIGS, _alter)


async def _alter(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if services.metadata.forwarding:  # a broker-only node: the controller answers
        return await services.metadata.forward(request)
    rt = ctx.response_type
    cls = nested(rt, "AlterConfigsResourceResponse")
    changes = []
    early: dict[int, ApiError] = {}
    for i, r in enumerate(request.resources):
        resource = ConfigResource(int(r.resource_type), r.resource_name)
        ops = []
        for c in r.configs:
            op = int(c.config_operation)
            if op not in AlterConfigOp._value2member_map_:
                early[i] = ApiError(ErrorCode.invalid_request, f"Unknown alter config operation {op}")
                break
            ops.append(AlterableConfig(c.name, AlterConfigOp(op), c.value))
        changes.append((resource, ops))
    valid = [c for i, c in enumerate(changes) if i not in early]
    results = iter(await services.metadata.incremental_alter_configs(valid, validate_only=bool(request.validate_only)))
    out = []
    for i, (resource, _) in enumerate(changes):
        error = early[i] if i in early else next(results).error
        out.append(
            build(
                cls,
                error_code=error.code,
                error_message=error.message if error.code != ErrorCode.none else None,
                resource_type=i8(resource.type),
                resource_name=resource.name,
            )
        )
    return build(rt, throttle_time=datetime.timedelta(0), responses=tuple(out))
