"""Config changes (AlterConfigs, IncrementalAlterConfigs) as a broker takes them in: the
check only the broker a change is for can make, of its `cordoned.log.dirs` against its own log
directories (as a Kafka broker validates its per-broker dynamic configs,
DynamicBrokerConfig.validate), and the answer, with the rest run or forwarded to the
controller (`answer_config_changes`)."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from kmirror.broker.api import RequestContext
from kmirror.broker.services import BrokerServices
from kmirror.config.cordoned_log_dirs import CORDONED_LOG_DIRS, resolve
from kmirror.config.definitions import ConfigError
from kmirror.metadata.controller.config_ops import AlterableConfig, AlterConfigOp, apply_list_op
from kmirror.metadata.controller.configs import AlterConfigsResult
from kmirror.metadata.controller.result import ApiError
from kmirror.metadata.image import ConfigResource, ConfigResourceType
from kmirror.protocol.entities import build, nested

T = TypeVar("T")


def _own(services: BrokerServices, resource: ConfigResource) -> bool:
    return (resource.type == ConfigResourceType.BROKER and resource.name == str(services.node_id)
            and services.config.is_broker)


def refusal(services: BrokerServices, resource: ConfigResource, value: str | None) -> ApiError | None:
    """INVALID_CONFIG when `value`, the resource's new `cordoned.log.dirs`, names a directory
    this broker does not have (None: the key is removed, or the resource is not this broker)."""
    if value is None or not _own(services, resource):
        return None
    try:
        resolve(value, services.config.log_dirs)
    except ConfigError as e:
        return ApiError(ErrorCode.invalid_config, f"requirement failed: {e}")
    return None


def incremental_refusal(services: BrokerServices, resource: ConfigResource,
                        ops: Sequence[AlterableConfig]) -> ApiError | None:
    """`refusal` of the value the operations leave (SET, DELETE, APPEND, SUBTRACT in order)."""
    if not _own(services, resource) or not any(op.name == CORDONED_LOG_DIRS for op in ops):
        return None
    value = services.metadata.image.configs.get(resource, {}).get(CORDONED_LOG_DIRS)
    for op in ops:
        if op.name != CORDONED_LOG_DIRS:
            continue
        if op.op == AlterConfigOp.DELETE or op.value is None:
            value = None
        elif op.op == AlterConfigOp.SET:
            value = op.value
        else:
            value = apply_list_op(op.op, value or "", op.value)
    return refusal(services, resource, value)


async def answer_config_changes(
    services: BrokerServices,
    ctx: RequestContext,
    request: Any,
    answers: dict[int, ApiError],
    changes: list[tuple[int, ConfigResource, T]],
    at_controller: Callable[[list[tuple[ConfigResource, T]]], Awaitable[list[AlterConfigsResult]]],
) -> Any:
    """The response of an (Incremental)AlterConfigs request whose resources `answers` already
    answers here (a refused `cordoned.log.dirs`, this node's loggers); the `changes` go to the
    controller: forwarded from a broker-only node, else run by `at_controller`."""
    if changes and services.metadata.forwarding:  # a broker-only node: the controller answers
        forwarded = await services.broker_metadata.forward(dataclasses.replace(
            request, resources=tuple(request.resources[i] for i, _, _ in changes)))
        for (i, _, _), answer in zip(changes, forwarded.responses, strict=True):
            answers[i] = ApiError(ErrorCode(int(answer.error_code)), answer.error_message)
    elif changes:
        results = await at_controller([(resource, change) for _, resource, change in changes])
        for (i, _, _), result in zip(changes, results, strict=True):
            answers[i] = result.error
    rt = ctx.response_type
    cls = nested(rt, "AlterConfigsResourceResponse")
    out = tuple(
        build(cls, error_code=answers[i].code,
              error_message=answers[i].message if answers[i].code != ErrorCode.none else None,
              resource_type=i8(int(r.resource_type)), resource_name=r.resource_name)
        for i, r in enumerate(request.resources)
    )
    return build(rt, throttle_time=datetime.timedelta(0), responses=out)
