"""The leader broker over the Kafka protocol (Kafka `RemoteLeaderEndPoint`).

Fetch v12+ (replica_id = this broker; `replica_state` from v15) with `last_fetched_epoch`,
and v19's `mirror_leader_epoch` when the leader serves it (else the client's negotiated
version, or the newest up to `max_fetch_version` when the endpoint is made with one),
OffsetsForLeaderEpoch with `replica_id`, ListOffsets with `replica_id` (the leader answers
its raw log start / log end). Fetches are sessionless unless the endpoint is made with
`fetch_sessions=True` (the mirror's source fetches): then an incremental fetch session
(KIP-227, `kmirror.replication.fetcher.session_handler`) lists only the partitions whose
fetch parameters changed, and the leader answers only those with something to say; a
leader without sessions (Fetch < v7, or one that answers session id 0) gets full requests.
Connects lazily through
`kmirror.client.connection.BrokerConnection` and reconnects after a failure; a failure
raises (the fetcher backs off).

A follower made with `wanted_fetch_version` (v19 once this cluster finalized
`mirror.version` >= 1) reconnects when its connection negotiated an older Fetch: a
connection opened before the feature was enabled (a running cluster enables it) would
otherwise fetch a mirror partition without `mirror_leader_epoch` for good, and could append
no source batch above its local leader epoch. Kafka likewise picks the inter-broker Fetch
version from the finalized features, not from a connection's first ApiVersions. While the
leader has not applied the feature yet, it tries again at most every 5 s.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from kmirror.client.connection import BrokerConnection
from kmirror.client.errors import KafkaConnectionError
from kmirror.client.network_stats import NetworkStats
from kmirror.client.protocol import CLIENT_MAX_VERSIONS, choose_version, request_schema
from kmirror.ports import Clock
from kmirror.protocol.entities import build, has_field, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.protocol.mirror import fetch as fetch_v19
from kmirror.replication.fetcher.engine import EpochQuery, FetchedPartition, FetchPartitionPlan, FetchPlan
from kmirror.replication.fetcher.session_handler import SESSION_ERRORS, FetchSessionHandler
from kmirror.replication.fetcher.truncation import mirror_leader_epoch_for_request
from kmirror.replication.outcomes import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, EpochEndOffset
from kmirror.security.client_config import PLAINTEXT, ClientSecurity
from kmirror.types import TopicPartition

FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH = 1, 2, 23
RENEGOTIATE_INTERVAL_MS = 5_000


def fetch_request_type(conn: BrokerConnection, max_version: int | None = None) -> type[Any]:
    """Fetch v19 (KIP-1279 MirrorLeaderEpoch) when the leader advertises it, else the
    negotiated version (at most `max_version` when given, else the client's cap): a
    follower of a mirror partition needs the leader's answer to bound the source epochs it
    appends."""
    low, high = conn.api_versions.get(FETCH, (0, -1))
    if low <= fetch_v19.VERSION <= high:
        return fetch_v19.FetchRequest
    if max_version is None:
        return conn.request_type(FETCH)
    version = choose_version(FETCH, conn.api_versions, {**CLIENT_MAX_VERSIONS, FETCH: max_version})
    if version is None:
        return conn.request_type(FETCH)  # raises: no version both speak
    return request_schema(FETCH, version)


def fetches_by_topic_id(rt: type[Any]) -> bool:
    """Fetch v13+ (request type `rt`) names topics by id only: the leader answers
    UNKNOWN_TOPIC_ID for an id it does not have, so an answer never comes from another
    topic under the same name."""
    return has_field(nested(rt, "FetchTopic"), "topic_id") and not has_field(nested(rt, "FetchTopic"), "topic")


class RemoteLeaderEndPoint:
    def __init__(self, host: str, port: int, replica_id: int, *, client_id: str, request_timeout_ms: int = 30_000,
                 security: ClientSecurity = PLAINTEXT, fetch_sessions: bool = False,
                 max_fetch_version: int | None = None,
                 wanted_fetch_version: tuple[Callable[[], int], Clock] | None = None) -> None:
        self.host = host
        self.security = security
        self.port = port
        self.replica_id = replica_id
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self._conn: BrokerConnection | None = None
        self._closed = False
        self.fetch_sessions = fetch_sessions
        self.max_fetch_version = max_fetch_version
        self.wanted_fetch_version = wanted_fetch_version
        self._renegotiate_at_ms = 0
        self.session = FetchSessionHandler()
        self.network_stats = NetworkStats()
        """What this endpoint's connections did, across reconnections (Kafka's client network metrics)."""

    def _older_than_wanted(self, conn: BrokerConnection) -> bool:
        """The connection speaks an older Fetch than the cluster's features call for, and
        the last reconnect for that was at least `RENEGOTIATE_INTERVAL_MS` ago."""
        if self.wanted_fetch_version is None:
            return False
        wanted, clock = self.wanted_fetch_version
        if conn.api_versions.get(FETCH, (0, -1))[1] >= wanted():
            return False
        now = clock.monotonic_ms()
        if now < self._renegotiate_at_ms:
            return False
        self._renegotiate_at_ms = now + RENEGOTIATE_INTERVAL_MS
        return True

    async def _connection(self) -> BrokerConnection:
        if self._closed:
            raise KafkaConnectionError(f"endpoint {self.host}:{self.port} is closed")
        if self._conn is None or not self._conn.connected or self._older_than_wanted(self._conn):
            if self._conn is not None:
                await self._conn.close()
            self._conn = None
            self.session.handle_failure()  # a session lives on the leader, not the connection; start anew
            conn = BrokerConnection(self.host, self.port, client_id=self.client_id,
                                    request_timeout_ms=self.request_timeout_ms, security=self.security,
                                    stats=self.network_stats)
            await conn.connect()
            self._conn = conn
        return self._conn

    def fetch_request_type(self, conn: BrokerConnection) -> type[Any]:
        return fetch_request_type(conn, self.max_fetch_version)

    async def fetch(self, plan: FetchPlan) -> dict[TopicPartition, FetchedPartition]:
        conn = await self._connection()
        rt = self.fetch_request_type(conn)
        by_id = fetches_by_topic_id(rt)
        ids = {p.topic_partition.topic: p.topic_id for p in plan.partitions}
        sent = self.session.build(plan, sessions=self.fetch_sessions and has_field(rt, "session_epoch"))
        policy = plan.policy
        fields: dict[str, Any] = {}
        if has_field(rt, "replica_state"):
            fields["replica_state"] = nested(rt, "ReplicaState")(replica_id=policy.replica_id, replica_epoch=policy.replica_epoch)
        request = build(
            rt,
            replica_id=policy.replica_id,
            max_wait=datetime.timedelta(milliseconds=policy.max_wait_ms),
            min_bytes=policy.min_bytes,
            max_bytes=policy.max_bytes,
            isolation_level=policy.isolation_level,
            session_id=sent.session_id,
            session_epoch=sent.session_epoch,
            topics=_fetch_topics(rt, sent.partitions),
            forgotten_topics_data=_forgotten_topics(rt, sent.forgotten),
            rack_id="",
            **fields,
        )
        timeout_ms = self.request_timeout_ms + policy.max_wait_ms
        try:
            response = await conn.send(request, timeout_ms=timeout_ms)
        except BaseException:
            self.session.handle_failure()
            raise
        error = ErrorCode(response.error_code)
        answered = self.session.handle_response(sent, error, int(getattr(response, "session_id", 0)))
        if not answered:
            if error in SESSION_ERRORS and not sent.full:
                return {}  # the leader lost or refused the session: the next round fetches in full at once
            return {p.topic_partition: FetchedPartition(error) for p in plan.partitions}
        names = {v: k for k, v in ids.items()}
        out: dict[TopicPartition, FetchedPartition] = {}
        for topic in response.responses:
            name = names.get(topic.topic_id) if by_id else topic.topic
            if name is None:
                continue
            for data in topic.partitions:
                diverging = getattr(data, "diverging_epoch", None)
                div = None
                if diverging is not None and int(diverging.end_offset) >= 0:
                    div = EpochEndOffset(int(diverging.epoch), int(diverging.end_offset))
                out[TopicPartition(name, int(data.partition_index))] = FetchedPartition(
                    ErrorCode(data.error_code),
                    data.records or b"",
                    int(data.high_watermark),
                    int(getattr(data, "log_start_offset", -1)),
                    int(getattr(data, "last_stable_offset", -1)),
                    div,
                    int(getattr(data, "mirror_leader_epoch", -1)),
                )
        return out

    async def fetch_epoch_end_offsets(self, queries: Sequence[EpochQuery]) -> dict[TopicPartition, EpochEndOffset | ErrorCode]:
        conn = await self._connection()
        rt = conn.request_type(OFFSET_FOR_LEADER_EPOCH)
        topics: dict[str, list[Any]] = {}
        for q in queries:
            topics.setdefault(q.topic_partition.topic, []).append(
                build(
                    nested(rt, "OffsetForLeaderPartition"),
                    partition=q.topic_partition.partition,
                    current_leader_epoch=q.current_leader_epoch,
                    leader_epoch=q.leader_epoch,
                )
            )
        request = build(
            rt,
            replica_id=self.replica_id,
            topics=tuple(build(nested(rt, "OffsetForLeaderTopic"), topic=t, partitions=tuple(ps)) for t, ps in topics.items()),
        )
        response = await conn.send(request)
        out: dict[TopicPartition, EpochEndOffset | ErrorCode] = {}
        for topic in response.topics:
            for p in topic.partitions:
                tp = TopicPartition(topic.topic, int(p.partition))
                code = ErrorCode(p.error_code)
                out[tp] = code if code != ErrorCode.none else EpochEndOffset(int(p.leader_epoch), int(p.end_offset))
        return out

    async def fetch_log_offsets(self, query: EpochQuery) -> tuple[int, int] | ErrorCode:
        start = await self._list_offset(query, EARLIEST_TIMESTAMP)
        if isinstance(start, ErrorCode):
            return start
        end = await self._list_offset(query, LATEST_TIMESTAMP)
        if isinstance(end, ErrorCode):
            return end
        return start, end

    async def _list_offset(self, query: EpochQuery, timestamp: int) -> int | ErrorCode:
        conn = await self._connection()
        rt = conn.request_type(LIST_OFFSETS)
        tp = query.topic_partition
        part = build(
            nested(rt, "ListOffsetsPartition"),
            partition_index=tp.partition,
            current_leader_epoch=query.current_leader_epoch,
            timestamp=timestamp,
            max_num_offsets=1,
        )
        request = build(
            rt, replica_id=self.replica_id, isolation_level=0,
            topics=(build(nested(rt, "ListOffsetsTopic"), name=tp.topic, partitions=(part,)),),
        )
        response = await conn.send(request)
        for topic in response.topics:
            for p in topic.partitions:
                code = ErrorCode(p.error_code)
                if code != ErrorCode.none:
                    return code
                return int(p.offset)
        return ErrorCode.unknown_topic_or_partition

    async def close(self) -> None:
        self._closed = True
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()


def _fetch_topics(rt: type, partitions: Sequence[FetchPartitionPlan]) -> tuple[Any, ...]:
    """The request's topics, each with its partitions (by name and id; the version keeps one)."""
    cls = nested(rt, "FetchPartition")
    mirror_fields = has_field(cls, "mirror_leader_epoch")
    topics: dict[str, list[Any]] = {}
    ids: dict[str, uuid.UUID] = {}
    for p in partitions:
        tp = p.topic_partition
        ids[tp.topic] = p.topic_id
        topics.setdefault(tp.topic, []).append(
            build(
                cls,
                partition=tp.partition,
                current_leader_epoch=p.current_leader_epoch,
                fetch_offset=p.fetch_offset,
                last_fetched_epoch=p.last_fetched_epoch,
                log_start_offset=p.log_start_offset,
                partition_max_bytes=p.partition_max_bytes,
                **({"mirror_leader_epoch": mirror_leader_epoch_for_request(p.mirror_leader_epoch)}
                   if mirror_fields else {}),
            )
        )
    return tuple(build(nested(rt, "FetchTopic"), topic=name, topic_id=ids[name], partitions=tuple(parts))
                 for name, parts in topics.items())


def _forgotten_topics(rt: type, partitions: Sequence[FetchPartitionPlan]) -> tuple[Any, ...]:
    """KIP-227's forgotten topics: session partitions the request takes out of the session."""
    if not partitions:
        return ()
    by_topic: dict[str, list[int]] = {}
    ids: dict[str, uuid.UUID] = {}
    for p in partitions:
        by_topic.setdefault(p.topic_partition.topic, []).append(p.topic_partition.partition)
        ids[p.topic_partition.topic] = p.topic_id
    cls = nested(rt, "ForgottenTopic")
    return tuple(build(cls, topic=name, topic_id=ids[name], partitions=tuple(parts)) for name, parts in by_topic.items())
