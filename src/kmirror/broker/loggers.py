"""The BROKER_LOGGER config resource (KIP-412): a node's logger levels, described and changed
while it runs, as `kafka-configs --entity-type broker-loggers --entity-name <id>` does.

- The resource name is the node's id: another id, or none, is INVALID_REQUEST (the request
  goes to the node whose loggers it names; nothing is forwarded to the controller).
- DescribeConfigs lists every logger of the node (Python's logger names, `kmirror.*` and
  Kafka's `kafka.authorizer.logger`) and `root`, each with its effective level in Kafka's
  names (FATAL, ERROR, WARN, INFO, DEBUG, TRACE), source DYNAMIC_BROKER_LOGGER_CONFIG.
- IncrementalAlterConfigs: SET a logger to one of those levels; DELETE a logger's own level,
  so it takes its parent's again (`root` cannot be deleted). APPEND and SUBTRACT are
  INVALID_REQUEST; an unknown logger or level is INVALID_CONFIG with Kafka's message. A
  resource's changes are checked together and applied together, or not at all.
- A change lasts until the node stops, as in Kafka (log4j's configuration is read again at
  start); `KMIRROR_LOG_LEVELS` sets levels from the start.

The node's loggers are reached through the `LoggerLevels` port (`kmirror.runtime.logger_levels`
over Python's logging); the rules above are this module's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from kio.schema.errors import ErrorCode

from kmirror.broker.authorizer_audit import TRACE
from kmirror.config.topic import ConfigSource
from kmirror.metadata.config_description import DescribeConfigsResult, DescribedConfig
from kmirror.metadata.controller.config_ops import AlterableConfig, AlterConfigOp
from kmirror.metadata.controller.result import NONE, ApiError
from kmirror.metadata.image import ConfigResource

ROOT = "root"
LEVELS = {"FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING, "INFO": logging.INFO,
          "DEBUG": logging.DEBUG, "TRACE": TRACE}
STRING_TYPE = 2  # DescribeConfigs' config type STRING


class LoggerLevels(Protocol):
    """A node's loggers: their names, effective levels and own levels (Python's level numbers)."""

    def names(self) -> list[str]:
        """Every logger the node has made, `root` excluded."""
        ...

    def effective_level(self, name: str) -> int: ...

    def set_level(self, name: str, level: int | None) -> None:
        """`None`: the logger's own level goes, it takes its parent's again."""
        ...


def level_name(level: int) -> str:
    """Kafka's name of a Python level: the most verbose Kafka level it lets through."""
    return next((name for name, value in sorted(LEVELS.items(), key=lambda kv: -kv[1]) if value <= level), "TRACE")


def logger_names(levels: LoggerLevels) -> list[str]:
    """`root` and every logger the node has made."""
    return [ROOT, *sorted(levels.names())]


def _resource_error(node_id: int, resource: ConfigResource) -> ApiError | None:
    if not resource.name:
        return ApiError(ErrorCode.invalid_request, "Broker id must not be empty")
    if resource.name != str(node_id):
        return ApiError(ErrorCode.invalid_request,
                        f"Unexpected broker id, expected {node_id}, but received {resource.name}")
    return None


def describe_loggers(levels: LoggerLevels, node_id: int, resource: ConfigResource,
                     keys: Sequence[str] | None) -> DescribeConfigsResult:
    error = _resource_error(node_id, resource)
    if error is not None:
        return DescribeConfigsResult(resource, error, ())
    known = logger_names(levels)
    names = known if keys is None else [k for k in keys if k in set(known)]
    return DescribeConfigsResult(resource, NONE, tuple(
        DescribedConfig(name, level_name(levels.effective_level(name)), ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
                        read_only=False, is_sensitive=False, config_type=STRING_TYPE, documentation=None, synonyms=())
        for name in names))


def alter_loggers(levels: LoggerLevels, node_id: int, resource: ConfigResource, ops: Sequence[AlterableConfig],
                  validate_only: bool = False) -> ApiError:
    error = _resource_error(node_id, resource) or _check(set(logger_names(levels)), ops)
    if error is not None:
        return error
    if not validate_only:
        for op in ops:
            levels.set_level(op.name, LEVELS[str(op.value)] if op.op == AlterConfigOp.SET else None)
    return NONE


def _check(known: set[str], ops: Sequence[AlterableConfig]) -> ApiError | None:
    for op in ops:
        if op.op in (AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT):
            return ApiError(ErrorCode.invalid_request,
                            f"{op.op.name} operation is not allowed for the BROKER_LOGGER resource")
        if op.name not in known:
            return ApiError(ErrorCode.invalid_config, f"Logger {op.name} does not exist!")
        if op.op == AlterConfigOp.DELETE and op.name == ROOT:
            return ApiError(ErrorCode.invalid_request, f"Removing the log level of the {ROOT} logger is not allowed")
        if op.op == AlterConfigOp.SET and op.value not in LEVELS:
            return ApiError(ErrorCode.invalid_config,
                            f"Cannot set the log level of {op.name} to {op.value} as it is not a supported log "
                            f"level. Valid log levels are {', '.join(sorted(LEVELS))}")
    return None
