"""The BROKER_LOGGER resource (`kmirror.broker.loggers`): a node's logger levels described and
changed while it runs, with Kafka's errors."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode

from kmirror.broker.authorizer_audit import TRACE
from kmirror.broker.loggers import alter_loggers, describe_loggers, level_name
from kmirror.config.topic import ConfigSource
from kmirror.metadata.controller.config_ops import AlterableConfig, AlterConfigOp
from kmirror.metadata.image import ConfigResource, ConfigResourceType
from kmirror.runtime.logger_levels import ProcessLoggerLevels

NODE = 7
PROCESS = ProcessLoggerLevels()
RESOURCE = ConfigResource(ConfigResourceType.BROKER_LOGGER, "7")
NAME = "kmirror.test.loggers.child"


@pytest.fixture
def child() -> Iterator[logging.Logger]:
    logger = logging.getLogger(NAME)
    parent = logging.getLogger("kmirror.test.loggers")
    parent.setLevel(logging.WARNING)
    yield logger
    logger.setLevel(logging.NOTSET)
    parent.setLevel(logging.NOTSET)


def levels(keys: list[str] | None = None) -> dict[str, str | None]:
    result = describe_loggers(PROCESS, NODE, RESOURCE, keys)
    assert result.error.code == ErrorCode.none
    assert all(c.source == ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG and not c.read_only for c in result.configs)
    return {c.name: c.value for c in result.configs}


def test_kafka_level_names() -> None:
    assert [level_name(v) for v in (50, 40, 30, 20, 10, TRACE, 25, 1)] == [
        "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE", "INFO", "TRACE"]


def test_describe_lists_root_and_every_logger_with_its_effective_level(child: logging.Logger) -> None:
    described = levels()
    assert described[NAME] == "WARN"  # inherited from its parent
    assert "root" in described
    assert levels([NAME, "no.such.logger"]) == {NAME: "WARN"}


def test_set_then_delete_returns_a_logger_to_its_parents_level(child: logging.Logger) -> None:
    ok = alter_loggers(PROCESS, NODE, RESOURCE, [AlterableConfig(NAME, AlterConfigOp.SET, "TRACE")])
    assert ok.code == ErrorCode.none
    assert child.isEnabledFor(TRACE) and levels([NAME]) == {NAME: "TRACE"}
    assert alter_loggers(PROCESS, NODE, RESOURCE, [AlterableConfig(NAME, AlterConfigOp.DELETE, None)]).code == ErrorCode.none
    assert levels([NAME]) == {NAME: "WARN"} and not child.isEnabledFor(logging.INFO)


def test_validate_only_changes_nothing(child: logging.Logger) -> None:
    ok = alter_loggers(PROCESS, NODE, RESOURCE, [AlterableConfig(NAME, AlterConfigOp.SET, "DEBUG")], validate_only=True)
    assert ok.code == ErrorCode.none and levels([NAME]) == {NAME: "WARN"}


@pytest.mark.parametrize(("name", "ops", "code", "message"), [
    ("7", [(NAME, AlterConfigOp.SET, "LOUD")], ErrorCode.invalid_config,
     f"Cannot set the log level of {NAME} to LOUD as it is not a supported log level. "
     "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"),
    ("7", [(NAME, AlterConfigOp.SET, "DEBUG"), ("no.such.logger", AlterConfigOp.SET, "DEBUG")],
     ErrorCode.invalid_config, "Logger no.such.logger does not exist!"),
    ("7", [(NAME, AlterConfigOp.APPEND, "DEBUG")], ErrorCode.invalid_request,
     "APPEND operation is not allowed for the BROKER_LOGGER resource"),
    ("7", [("root", AlterConfigOp.DELETE, None)], ErrorCode.invalid_request,
     "Removing the log level of the root logger is not allowed"),
    ("8", [(NAME, AlterConfigOp.SET, "DEBUG")], ErrorCode.invalid_request,
     "Unexpected broker id, expected 7, but received 8"),
    ("", [(NAME, AlterConfigOp.SET, "DEBUG")], ErrorCode.invalid_request, "Broker id must not be empty"),
])
def test_a_bad_change_is_refused_whole(child: logging.Logger, name: str, ops: list, code: ErrorCode,
                                       message: str) -> None:
    resource = ConfigResource(ConfigResourceType.BROKER_LOGGER, name)
    error = alter_loggers(PROCESS, NODE, resource, [AlterableConfig(*op) for op in ops])
    assert (error.code, error.message) == (code, message)
    assert levels([NAME]) == {NAME: "WARN"}  # the valid first change of the list was not applied either


def test_describe_of_another_node_is_refused() -> None:
    result = describe_loggers(PROCESS, NODE, ConfigResource(ConfigResourceType.BROKER_LOGGER, "1"), None)
    assert result.error.code == ErrorCode.invalid_request and result.configs == ()
