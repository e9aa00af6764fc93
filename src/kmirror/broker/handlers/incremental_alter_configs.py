"""IncrementalAlterConfigs (key 44, v0-1): SET / DELETE / APPEND / SUBTRACT per key; a
BROKER_LOGGER resource sets this node's logger levels (`kmirror.broker.loggers`)."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import ALTER_CONFIGS
from kmirror.broker.config_authorization import authorized_config_change
from kmirror.broker.cordoned_log_dirs import incremental_refusal
from kmirror.broker.loggers import alter_loggers
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.configs import AlterableConfig, AlterConfigOp
from kmirror.metadata.controller.result import ApiError
from kmirror.metadata.image import ConfigResource, ConfigResourceType
from kmirror.protocol.entities import build, nested


@api(44, "IncrementalAlterConfigs", 0, 1, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    """ALTER_CONFIGS on each resource (`config_authorization`), then the change."""
    return await authorized_config_change(services, ctx, request, ALTER_CONFIGS, _alter)


async def _alter(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    """BROKER_LOGGER resources are this node's own (`kmirror.broker.loggers`, never forwarded,
    as Kafka's ConfigAdminManager splits them off); the others are the controller's."""
    rt = ctx.response_type
    cls = nested(rt, "AlterConfigsResourceResponse")
    validate_only = bool(request.validate_only)
    answers: dict[int, ApiError] = {}
    changes: list[tuple[int, ConfigResource, list[AlterableConfig]]] = []
    for i, r in enumerate(request.resources):
        resource = ConfigResource(int(r.resource_type), r.resource_name)
        ops = []
        for c in r.configs:
            op = int(c.config_operation)
            if op not in AlterConfigOp._value2member_map_:
                answers[i] = ApiError(ErrorCode.invalid_request, f"Unknown alter config operation {op}")
                break
            ops.append(AlterableConfig(c.name, AlterConfigOp(op), c.value))
        if i in answers:
            continue
        refused = incremental_refusal(services, resource, ops)
        if refused is not None:
            answers[i] = refused
        elif resource.type == ConfigResourceType.BROKER_LOGGER:
            answers[i] = alter_loggers(services.logger_levels, services.node_id, resource, ops, validate_only)
        else:
            changes.append((i, resource, ops))
    if changes and services.metadata.forwarding:  # a broker-only node: the controller answers
        forwarded = await services.broker_metadata.forward(dataclasses.replace(
            request, resources=tuple(request.resources[i] for i, _, _ in changes)))
        for (i, _, _), answer in zip(changes, forwarded.responses, strict=True):
            answers[i] = ApiError(ErrorCode(int(answer.error_code)), answer.error_message)
    elif changes:
        results = await services.controller_metadata.incremental_alter_configs(
            [(r, ops) for _, r, ops in changes], validate_only=validate_only)
        for (i, _, _), result in zip(changes, results, strict=True):
            answers[i] = result.error
    out = []
    for i, r in enumerate(request.resources):
        error = answers[i]
        out.append(
            build(
                cls,
                error_code=error.code,
                error_message=error.message if error.code != ErrorCode.none else None,
                resource_type=i8(int(r.resource_type)),
                resource_name=r.resource_name,
            )
        )
    return build(rt, throttle_time=datetime.timedelta(0), responses=tuple(out))
