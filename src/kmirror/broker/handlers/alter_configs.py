"""AlterConfigs (key 33, v0-2): the legacy API, whose config set replaces every dynamic
config of the resource."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import ALTER_CONFIGS
from kmirror.broker.config_authorization import authorized_config_change
from kmirror.broker.cordoned_log_dirs import refusal
from kmirror.broker.services import BrokerServices
from kmirror.config.cordoned_log_dirs import CORDONED_LOG_DIRS
from kmirror.metadata.controller.result import ApiError
from kmirror.metadata.image import ConfigResource
from kmirror.protocol.entities import build, nested


@api(33, "AlterConfigs", 0, 2, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    """ALTER_CONFIGS on each resource (`config_authorization`), then the change."""
    return await authorized_config_change(services, ctx, request, ALTER_CONFIGS, _alter)


async def _alter(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    """A `cordoned.log.dirs` for this broker is checked here (`cordoned_log_dirs`); the rest is
    the controller's."""
    rt = ctx.response_type
    answers: dict[int, ApiError] = {}
    changes: list[tuple[int, ConfigResource, dict[str, str | None]]] = []
    for i, r in enumerate(request.resources):
        resource = ConfigResource(int(r.resource_type), r.resource_name)
        configs = {c.name: c.value for c in r.configs}
        refused = refusal(services, resource, configs.get(CORDONED_LOG_DIRS))
        if refused is not None:
            answers[i] = refused
        else:
            changes.append((i, resource, configs))
    if changes and services.metadata.forwarding:  # a broker-only node: the controller answers
        forwarded = await services.broker_metadata.forward(dataclasses.replace(
            request, resources=tuple(request.resources[i] for i, _, _ in changes)))
        for (i, _, _), answer in zip(changes, forwarded.responses, strict=True):
            answers[i] = ApiError(ErrorCode(int(answer.error_code)), answer.error_message)
    elif changes:
        results = await services.controller_metadata.alter_configs([(r, c) for _, r, c in changes],
                                                        validate_only=bool(request.validate_only))
        for (i, _, _), result in zip(changes, results, strict=True):
            answers[i] = result.error
    cls = nested(rt, "AlterConfigsResourceResponse")
    out = tuple(
        build(
            cls,
            error_code=answers[i].code,
            error_message=answers[i].message if answers[i].code != ErrorCode.none else None,
            resource_type=i8(int(r.resource_type)),
            resource_name=r.resource_name,
        )
        for i, r in enumerate(request.resources)
    )
    return build(rt, throttle_time=datetime.timedelta(0), responses=out)
