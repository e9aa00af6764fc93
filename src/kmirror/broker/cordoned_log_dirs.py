"""`cordoned.log.dirs` changes addressed to this broker, checked against its own log
directories before the controller stores them, as a Kafka broker validates its per-broker
dynamic configs (DynamicBrokerConfig.validate): only the broker knows its `log.dirs`."""

from __future__ import annotations

from collections.abc import Sequence

from kio.schema.errors import ErrorCode

from kmirror.broker.services import BrokerServices
from kmirror.config.cordoned_log_dirs import CORDONED_LOG_DIRS, resolve
from kmirror.config.definitions import ConfigError
from kmirror.metadata.controller.config_ops import AlterableConfig, AlterConfigOp, apply_list_op
from kmirror.metadata.controller.result import ApiError
from kmirror.metadata.image import ConfigResource, ConfigResourceType


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
