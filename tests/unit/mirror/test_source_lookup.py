"""Describing source topics, also at a source that is not kmirror: a source without
DescribeConfigs (librdkafka's mock cluster) has no topic configs to copy; a topic without
an id cannot be mirrored; other errors are answered with their own code; many topics cost
two requests, not two each."""

import asyncio
import types
import uuid
from typing import Any

import pytest

from kmirror.client.admin import Admin, ConfigEntry, ConfigResourceType, TopicDescription
from kmirror.client.errors import KafkaError
from kmirror.config.mirror import MirrorConfig
from kmirror.mirror.metadata_sync.admins import SyncAdmins
from kmirror.mirror.source_lookup import (
    MirrorSourceLookups,
    SourceDescription,
    SourceTopic,
    describe_source_topics,
)
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
    """The Admin calls `describe_source_topics` makes, answered from fixed values; counts them."""

    def __init__(self, topic_id: uuid.UUID | None, configs: list[ConfigEntry] | ErrorCode,
                 topic_error: ErrorCode = ErrorCode.none) -> None:
        self.topic_id, self.configs, self.topic_error = topic_id, configs, topic_error
        self.calls = 0

    async def describe_topics_results(self, names: list[str]) -> dict[str, TopicDescription | KafkaError]:
        self.calls += 1
        if self.topic_error:
            return {n: KafkaError(self.topic_error, context=n) for n in names}
        return {n: TopicDescription(n, self.topic_id, False, (object(), object(), object()))  # type: ignore[arg-type]
                for n in names}

    async def describe_configs_results(self, resource_type: ConfigResourceType,
                                       names: list[str]) -> dict[str, list[ConfigEntry] | KafkaError]:
        self.calls += 1
        if self.configs == ErrorCode.unsupported_version:
            raise KafkaError(self.configs, context=f"topic {names[0]}")
        if isinstance(self.configs, ErrorCode):
            return {n: KafkaError(self.configs, context=f"topic {n}") for n in names}
        return {n: self.configs for n in names}


def describe(admin: SourceAdmin, names: tuple[str, ...] = ("orders",)) -> dict[str, SourceTopic | int]:
    return asyncio.run(describe_source_topics(admin, list(names)))  # type: ignore[arg-type]


def test_a_source_without_describe_configs_is_mirrored_without_topic_configs() -> None:
    assert describe(SourceAdmin(TOPIC_ID, ErrorCode.unsupported_version)) == {
        "orders": SourceTopic("orders", TOPIC_ID, 3, {})}


def test_only_configs_set_on_the_source_topic_are_copied() -> None:
    entries = [ConfigEntry("retention.ms", "1000", 1, False, False),
               ConfigEntry("segment.bytes", "1073741824", 5, False, False),
               ConfigEntry("secret", "x", 1, False, True)]
    assert describe(SourceAdmin(TOPIC_ID, entries)) == {
        "orders": SourceTopic("orders", TOPIC_ID, 3, {"retention.ms": "1000"})}


def test_a_topic_without_id_is_unknown_topic_id() -> None:
    assert describe(SourceAdmin(None, [])) == {"orders": ErrorCode.unknown_topic_id}


def test_other_errors_are_answered_with_their_own_code() -> None:
    assert describe(SourceAdmin(TOPIC_ID, ErrorCode.topic_authorization_failed)) == {
        "orders": ErrorCode.topic_authorization_failed}
    assert describe(SourceAdmin(TOPIC_ID, [], ErrorCode.unknown_topic_or_partition)) == {
        "orders": ErrorCode.unknown_topic_or_partition}


def test_many_topics_cost_two_requests() -> None:
    admin = SourceAdmin(TOPIC_ID, [])
    names = tuple(f"t{i}" for i in range(500))
    described = describe(admin, names)
    assert list(described) == list(names) and admin.calls == 2


class ConnectedSourceAdmin(SourceAdmin):
    """`SourceAdmin` with the cluster `describe_source` connects and reads the cluster id of."""

    def __init__(self) -> None:
        super().__init__(TOPIC_ID, [])
        self.cluster = types.SimpleNamespace(metadata=types.SimpleNamespace(cluster_id="source-id"),
                                             any_connection=self._connect)
        self.connects = 0
        self.closed = False

    async def _connect(self) -> None:
        self.connects += 1

    async def close(self) -> None:
        self.closed = True


def test_lookups_keep_one_admin_per_mirror_until_its_connection_configs_change() -> None:
    made: list[tuple[str, str, ConnectedSourceAdmin]] = []

    def factory(bootstrap: str, client_id: str, config: MirrorConfig | None) -> ConnectedSourceAdmin:
        made.append((bootstrap, client_id, ConnectedSourceAdmin()))
        return made[-1][2]

    lookups = MirrorSourceLookups(SyncAdmins(1, lambda: None, None, "lookup", factory))  # type: ignore[arg-type]
    east = MirrorConfig(("east:9092",), source_connection={"bootstrap.servers": "east:9092"})
    moved = MirrorConfig(("west:9092",), source_connection={"bootstrap.servers": "west:9092"})

    async def go() -> None:
        first = await lookups("dr", east, ["orders"])
        assert first == SourceDescription("source-id", {"orders": SourceTopic("orders", TOPIC_ID, 3, {})})
        await lookups("dr", east, ["orders", "payments"])
        await lookups("audit", east, ["orders"])
        assert [(b, c) for b, c, _ in made] == [("east:9092", "broker-1-mirror-dr-lookup"),
                                               ("east:9092", "broker-1-mirror-audit-lookup")]
        assert made[0][2].calls == 4  # dr's admin kept: Metadata + DescribeConfigs twice
        await lookups("dr", moved, ["orders"])  # dr's source moved: a new admin, the old one closed
        assert made[2][0] == "west:9092" and made[0][2].closed and not made[1][2].closed
        await lookups.close()
        assert all(admin.closed for _, _, admin in made)

    asyncio.run(go())
