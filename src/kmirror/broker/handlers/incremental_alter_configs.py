"""IncrementalAlterConfigs (key 44, v0-1): SET / DELETE / APPEND / SUBTRACT per key; a
BROKER_LOGGER resource sets this node's logger levels (`kmirror.broker.loggers`)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import ALTER_CONFIGS
from kmirror.broker.config_authorization import authorized_config_change
from kmirror.broker.config_changes import answer_config_changes, incremental_refusal
from kmirror.broker.loggers import alter_loggers
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.configs import AlterableConfig, AlterConfigOp
from kmirror.metadata.controller.result import ApiError
from kmirror.metadata.image import ConfigResource, ConfigResourceType


@api(44, "IncrementalAlterConfigs", 0, 1, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    """ALTER_CONFIGS on each resource (`config_authorization`), then the change."""
    return await authorized_config_change(services, ctx, request, ALTER_CONFIGS, _alter)


async def _alter(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    """BROKER_LOGGER resources are this node's own (`kmirror.broker.loggers`, never forwarded,
    as Kafka's ConfigAdminManager splits them off); the others are the controller's."""
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
    return await answer_config_changes(
        services, ctx, request, answers, changes,
        lambda items: services.controller_metadata.incremental_alter_configs(items, validate_only=validate_only))
