"""AlterConfigs (key 33, v0-2): the legacy API, whose config set replaces every dynamic
config of the resource."""

from __future__ import annotations

from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import ALTER_CONFIGS
from kmirror.broker.config_authorization import authorized_config_change
from kmirror.broker.config_changes import answer_config_changes, refusal
from kmirror.broker.services import BrokerServices
from kmirror.config.cordoned_log_dirs import CORDONED_LOG_DIRS
from kmirror.metadata.controller.result import ApiError
from kmirror.metadata.image import ConfigResource


@api(33, "AlterConfigs", 0, 2, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    """ALTER_CONFIGS on each resource (`config_authorization`), then the change."""
    return await authorized_config_change(services, ctx, request, ALTER_CONFIGS, _alter)


async def _alter(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    """A `cordoned.log.dirs` for this broker is checked here (`config_changes`); the rest is
    the controller's."""
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
    return await answer_config_changes(
        services, ctx, request, answers, changes,
        lambda items: services.controller_metadata.alter_configs(items, validate_only=bool(request.validate_only)))
