"""A client's connections to one cluster: bootstrap, Metadata, one connection per broker.

`Cluster` connects to the first reachable bootstrap server, learns brokers and topics with
Metadata, and opens (lazily, then reuses) one `BrokerConnection` per broker id. Callers that
get NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION or LEADER_NOT_AVAILABLE call
`refresh()` and retry, as Kafka's clients do after `metadata.max.age.ms` or on such errors.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.client.connection import BrokerConnection, parse_bootstrap
from kmirror.client.errors import KafkaConnectionError, KafkaError
from kmirror.client.metadata import ClusterMetadata
from kmirror.protocol.entities import build, nested
from kmirror.security.client_config import PLAINTEXT, ClientSecurity
from kmirror.types import TopicPartition

METADATA_KEY = 3

# Errors after which fresh metadata may route the request to the right broker.
REFRESH_ERRORS = frozenset(
    {
        ErrorCode.not_leader_or_follower,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.leader_not_available,
        ErrorCode.fenced_leader_epoch,
        ErrorCode.not_controller,
    }
)


class Cluster:
    def __init__(
        self,
        bootstrap_servers: str,
        *,
        client_id: str = "kmirror",
        request_timeout_ms: int = 30_000,
        connect_timeout_ms: int = 10_000,
        security: ClientSecurity = PLAINTEXT,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.security = security
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.metadata = ClusterMetadata(cluster_id=None, controller_id=-1, brokers={})
        self._connections: dict[int, BrokerConnection] = {}
        self._bootstrap_connection: BrokerConnection | None = None
        self._lock = asyncio.Lock()
        self._bootstrap_lock = asyncio.Lock()
        self.loaded = False
        """Metadata of every topic was answered once (`refresh()` or `load()`)."""
        self._loading: asyncio.Future[ClusterMetadata] | None = None

    def _new_connection(self, host: str, port: int) -> BrokerConnection:
        return BrokerConnection(
            host,
            port,
            client_id=self.client_id,
            request_timeout_ms=self.request_timeout_ms,
            connect_timeout_ms=self.connect_timeout_ms,
            security=self.security,
        )

    async def connect(self) -> None:
        """Connect to a bootstrap server and load metadata for all topics."""
        await self.refresh()

    async def any_connection(self) -> BrokerConnection:
        """A live connection to some broker: a known broker if any, else a bootstrap server."""
        for conn in self._connections.values():
            if conn.connected:
                return conn
        if self._bootstrap_connection is not None and self._bootstrap_connection.connected:
            return self._bootstrap_connection
        for broker_id in self.metadata.brokers:
            try:
                return await self.connection(broker_id)
            except KafkaConnectionError:
                continue
        async with self._bootstrap_lock:  # callers at once share one new connection
            if self._bootstrap_connection is not None and self._bootstrap_connection.connected:
                return self._bootstrap_connection
            errors: list[str] = []
            for host, port in self.bootstrap:
                conn = self._new_connection(host, port)
                try:
                    await conn.connect()
                except KafkaConnectionError as exc:
                    errors.append(str(exc))
                    continue
                self._bootstrap_connection = conn
                return conn
        raise KafkaConnectionError(errors[-1] if len(errors) == 1 else "; ".join(errors))

    async def connection(self, broker_id: int) -> BrokerConnection:
        conn = self._connections.get(broker_id)
        if conn is not None and conn.connected:
            return conn
        broker = self.metadata.brokers.get(broker_id)
        if broker is None:
            raise KafkaConnectionError(f"broker {broker_id} is not in the cluster metadata")
        async with self._lock:
            conn = self._connections.get(broker_id)
            if conn is not None and conn.connected:
                return conn
            conn = self._new_connection(broker.host, broker.port)
            await conn.connect()
            self._connections[broker_id] = conn
            return conn

    async def refresh(self, topics: list[str] | None = None) -> ClusterMetadata:
        """Metadata for `topics` (None: all topics). Replaces the cached view when topics is None."""
        conn = await self.any_connection()
        request = self.metadata_request(conn, topics)
        response = await conn.send(request)
        fresh = ClusterMetadata.from_response(response)
        if topics is None:
            self.metadata = fresh
            self.loaded = True
        else:
            merged = dict(self.metadata.topics)
            merged.update(fresh.topics)
            self.metadata = ClusterMetadata(fresh.cluster_id, fresh.controller_id, fresh.brokers, merged)
        return fresh

    async def load(self) -> None:
        """Metadata of every topic, once: callers that find none loaded share one request
        (thousands of partitions looking their leader up together), and its error; the next
        call after an error asks again."""
        if self.loaded:
            return
        if self._loading is None:
            self._loading = asyncio.ensure_future(self.refresh())
            self._loading.add_done_callback(self._loaded)
        await asyncio.shield(self._loading)

    def _loaded(self, loading: asyncio.Future[ClusterMetadata]) -> None:
        self._loading = None
        if not loading.cancelled():
            loading.exception()  # retrieved here: every waiter has it raised

    @staticmethod
    def metadata_request(conn: BrokerConnection, topics: list[str] | None) -> Any:
        request_type = conn.request_type(METADATA_KEY)
        version = request_type.__version__
        if topics is None:
            requested: Any = () if version == 0 else None  # v0: empty list means all topics
        else:
            Topic = nested(request_type, "MetadataRequestTopic")
            requested = tuple(build(Topic, name=name, topic_id=None) for name in topics)
        return conn.build_request(
            METADATA_KEY,
            topics=requested,
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )

    async def by_leader(self, tps: Iterable[TopicPartition]) -> list[tuple[BrokerConnection, list[TopicPartition]]]:
        """The partitions grouped by their leader's connection (one request per leader)."""
        groups: dict[int, tuple[BrokerConnection, list[TopicPartition]]] = {}
        for tp in tps:
            conn = await self.leader_connection(tp)
            groups.setdefault(id(conn), (conn, []))[1].append(tp)
        return list(groups.values())

    async def leader_connection(self, tp: TopicPartition) -> BrokerConnection:
        """A connection to the partition's leader, refreshing metadata once if it is unknown."""
        leader = self.metadata.leader_for(tp)
        if leader is None:
            await self.refresh([tp.topic])
            leader = self.metadata.leader_for(tp)
        if leader is None:
            topic = self.metadata.topics.get(tp.topic)
            if topic is None or topic.error_code or tp.partition not in topic.partitions:
                code = topic.error_code if topic and topic.error_code else ErrorCode.unknown_topic_or_partition
                raise KafkaError(code, context=str(tp))
            raise KafkaError(ErrorCode.leader_not_available, context=str(tp))
        return await self.connection(leader)

    async def controller_connection(self) -> BrokerConnection:
        """Where admin requests go. KRaft brokers forward them, so any broker would do; prefer the
        advertised controller id when it is a broker we know."""
        controller = self.metadata.controller_id
        if controller in self.metadata.brokers:
            try:
                return await self.connection(controller)
            except KafkaConnectionError:
                pass
        return await self.any_connection()

    async def close(self) -> None:
        conns = list(self._connections.values())
        if self._bootstrap_connection is not None:
            conns.append(self._bootstrap_connection)
        self._connections.clear()
        self._bootstrap_connection = None
        for conn in conns:
            await conn.close()

    async def __aenter__(self) -> Cluster:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


