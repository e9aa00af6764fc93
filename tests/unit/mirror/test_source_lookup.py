"""Describing a source topic at a source that is not kmirror: a source without
DescribeConfigs (librdkafka's mock cluster) has no topic configs to copy; a topic without
an id cannot be mirrored; other errors are answered with their own code."""

import asyncio
import types
import uuid
from typing import Any

import pytest

from kmirror.client.admin import Admin, ConfigEntry, ConfigResourceType, TopicDescription
from kmirror.client.errors import KafkaError
from kmirror.mirror.service import SourceTopic, describe_source_topic
from kmirror.protocol.errors import ErrorCode

TOPIC_ID = uuid.UUID("11111111-2222-4333-8444-555555555555")


class SourceBrokerWithout:
    """A connection to a source broker that lacks some APIs; it must never be sent a request."""

    def __init__(self, *api_keys: int) -> None:
        self.address = "source:9092"
        self.api_versions = {k: (0, 4) for k in range(70) if k not in api_keys}

    async def send(self, request: Any) -> Any:
        raise AssertionError(f"sent {type(request).__name__} to a broker that lacks it")


class OneBrokerCluster:
    def __init__(self, conn: SourceBrokerWithout) -> None:
        self.conn = conn
        self.metadata = types.SimpleNamespace(brokers={}, controller_id=-1)

    async def controller_connection(self) -> SourceBrokerWithout:
        return self.conn

    async def any_connection(self) -> SourceBrokerWithout:
        return self.conn


def test_describe_configs_at_a_broker_without_it_is_unsupported_version() -> None:
    admin = Admin(OneBrokerCluster(SourceBrokerWithout(32)))  # type: ignore[arg-type]
    with pytest.raises(KafkaError) as info:
        asyncio.run(admin.describe_configs(ConfigResourceType.TOPIC, "orders"))
    assert info.value.error_code == ErrorCode.unsupported_version
    assert str(info.value) == "topic orders: UNSUPPORTED_VERSION: source:9092 does not support DescribeConfigs"


class SourceAdmin:
    """The Admin calls `describe_source_topic` makes, answered from fixed values."""

    def __init__(self, topic_id: uuid.UUID | None, configs: list[ConfigEntry] | ErrorCode,
                 topic_error: ErrorCode = ErrorCode.none) -> None:
        self.topic_id, self.configs, self.topic_error = topic_id, configs, topic_error

    async def describe_topics(self, names: list[str]) -> dict[str, TopicDescription]:
        if self.topic_error:
            raise KafkaError(self.topic_error, context=names[0])
        return {n: TopicDescription(n, self.topic_id, False, (object(), object(), object())) for n in names}  # type: ignore[arg-type]

    async def describe_configs(self, resource_type: ConfigResourceType, name: str) -> list[ConfigEntry]:
        if isinstance(self.configs, ErrorCode):
            raise KafkaError(self.configs, context=f"topic {name}")
        return self.configs


def describe(admin: SourceAdmin) -> SourceTopic | int:
    return asyncio.run(describe_source_topic(admin, "orders"))


def test_a_source_without_describe_configs_is_mirrored_without_topic_configs() -> None:
    assert describe(SourceAdmin(TOPIC_ID, ErrorCode.unsupported_version)) == SourceTopic("orders", TOPIC_ID, 3, {})


def test_only_configs_set_on_the_source_topic_are_copied() -> None:
    entries = [ConfigEntry("retention.ms", "1000", 1, False, False),
               ConfigEntry("segment.bytes", "1073741824", 5, False, False),
               ConfigEntry("secret", "x", 1, False, True)]
    assert describe(SourceAdmin(TOPIC_ID, entries)) == SourceTopic("orders", TOPIC_ID, 3, {"retention.ms": "1000"})


def test_a_topic_without_id_is_unknown_topic_id() -> None:
    assert describe(SourceAdmin(None, [])) == ErrorCode.unknown_topic_id


def test_other_errors_are_answered_with_their_own_code() -> None:
    assert describe(SourceAdmin(TOPIC_ID, ErrorCode.topic_authorization_failed)) == ErrorCode.topic_authorization_failed
    assert describe(SourceAdmin(TOPIC_ID, [], ErrorCode.unknown_topic_or_partition)) == \
        ErrorCode.unknown_topic_or_partition
