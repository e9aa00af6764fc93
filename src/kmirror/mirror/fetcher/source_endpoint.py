"""The source cluster as a `LeaderEndPoint` (KIP-1279 "MirrorFetcher").

`SourceClusterEndPoint` is `RemoteLeaderEndPoint` speaking to ONE source broker as a
consumer: Fetch with replica id -1 and READ_COMMITTED (the mirror policy) in an incremental
fetch session (KIP-227) when the source keeps one, so an idle partition is not re-listed in
every request nor in every answer, and in the newest version both sides speak (up to v18,
v19 when the source serves KIP-1279): from v13 on the mirror's topic is named by its id, so
an answer cannot come from another topic under the name and needs no Metadata check
afterwards (older versions get one per answer with records); OffsetsForLeaderEpoch
(when the source has it) and ListOffsets with replica id -1. Partitions whose answer says this broker no longer leads
them (NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION,
UNKNOWN_TOPIC_ID), and every partition of a request that failed (the broker is unreachable:
killed, partitioned), are reported through `on_leader_change`: the fetcher manager refreshes
the source metadata and moves them to the fetcher of the new source leader.

`ClientSourceCluster` is the `SourceCluster` port over `kmirror.client.Cluster` with the
mirror's `bootstrap.servers` and security configs (every source connection, metadata and
fetch, speaks the mirror's `security.protocol`): partition leaders and topic ids from source metadata, the
source cluster id, and the partition's last mirrored epoch (DescribeMirrors on the source;
None when the source lacks the API, i.e. UNSUPPORTED_VERSION).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar
from uuid import UUID

from kmirror.client.admin import LATEST_TIMESTAMP, Admin
from kmirror.client.cluster import Cluster
from kmirror.client.errors import KafkaAuthenticationError, KafkaError
from kmirror.client.metadata import ClusterMetadata, TopicMetadata
from kmirror.mirror.source_topic import NO_TOPIC_ID, check_source_topic
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.fetcher.endpoint import LeaderEndPoint
from kmirror.replication.fetcher.engine import EpochQuery, FetchedPartition, FetchPlan
from kmirror.replication.fetcher.remote_endpoint import (
    OFFSET_FOR_LEADER_EPOCH,
    RemoteLeaderEndPoint,
    fetches_by_topic_id,
)
from kmirror.replication.outcomes import EpochEndOffset
from kmirror.security.client_config import PLAINTEXT, ClientSecurity
from kmirror.types import TopicPartition

from .policy import CONSUMER_REPLICA_ID

T = TypeVar("T")
log = logging.getLogger(__name__)

DESCRIBE_MIRRORS = 99
SOURCE_FETCH_MAX_VERSION = 18  # kio's newest Fetch; v19 is taken whenever the source advertises it
UNDEFINED_EPOCH_END_OFFSET = EpochEndOffset(-1, -1)

LEADER_MOVED_ERRORS: frozenset[ErrorCode] = frozenset({
    ErrorCode.not_leader_or_follower,
    ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch,
    ErrorCode.unknown_topic_or_partition,
    ErrorCode.unknown_topic_id,
    ErrorCode.leader_not_available,
})


@dataclass(frozen=True, slots=True)
class SourceLeader:
    broker_id: int
    host: str
    port: int
    topic_id: UUID | None


class SourceCluster(Protocol):
    """What the mirror fetcher and manager need of one mirror's source cluster."""

    async def cluster_id(self, refresh: bool = False) -> str:
        """The cluster id the source reports; `refresh`: from a fresh answer."""
        ...

    async def partition_leader(self, tp: TopicPartition, refresh: bool = False) -> SourceLeader | None: ...

    async def topic_id(self, topic: str) -> UUID | None:
        """The id the source lists `topic` with, from fresh metadata: None when it does not
        list the name (deleted), `NO_TOPIC_ID` when it lists it without an id."""
        ...

    def endpoint(self, leader: SourceLeader, client_id: str,
                 on_leader_change: Callable[[set[TopicPartition]], None]) -> LeaderEndPoint: ...

    async def last_mirrored_epoch(self, mirror_name: str, tp: TopicPartition) -> int | None: ...

    async def epoch_end_offset(self, query: EpochQuery) -> EpochEndOffset | ErrorCode:
        """The source leader's end of `query`'s epoch (OffsetsForLeaderEpoch), or the error it
        answered for the partition. Raises when the source cannot be asked."""
        ...

    async def high_watermarks(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        """The source partitions' high watermarks (ListOffsets LATEST, one request per source
        leader); None where unknown. Raises when the source cannot be asked."""
        ...

    async def close(self) -> None: ...


def listed_topic_id(topic: TopicMetadata | None) -> UUID | None:
    """A Metadata entry as `check_source_topic` takes it: None when the source does not list
    the topic (absent, or UNKNOWN_TOPIC_OR_PARTITION / UNKNOWN_TOPIC_ID for it)."""
    if topic is None or topic.error_code in (ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_id):
        return None
    return NO_TOPIC_ID if topic.topic_id is None else topic.topic_id


class SourceClusterEndPoint(RemoteLeaderEndPoint):
    def __init__(self, host: str, port: int, *, client_id: str,
                 on_leader_change: Callable[[set[TopicPartition]], None] | None = None,
                 request_timeout_ms: int = 30_000, security: ClientSecurity = PLAINTEXT) -> None:
        super().__init__(host, port, CONSUMER_REPLICA_ID, client_id=client_id, request_timeout_ms=request_timeout_ms,
                         security=security, fetch_sessions=True, max_fetch_version=SOURCE_FETCH_MAX_VERSION)
        self.on_leader_change = on_leader_change

    async def fetch(self, plan: FetchPlan) -> dict[TopicPartition, FetchedPartition]:
        try:
            results = await super().fetch(plan)
            if results and not fetches_by_topic_id(self.fetch_request_type(await self._connection())):
                expected = {p.topic_partition: p.topic_id for p in plan.partitions if p.topic_partition in results}
                other = await self._answered_by_another_topic(expected)
                results = {tp: FetchedPartition(ErrorCode.unknown_topic_id) if tp in other else r
                           for tp, r in results.items()}
        except Exception:
            self._moved({p.topic_partition for p in plan.partitions})
            raise
        self._moved({tp for tp, r in results.items() if r.error in LEADER_MOVED_ERRORS})
        return results

    async def fetch_epoch_end_offsets(
        self, queries: Sequence[EpochQuery]
    ) -> dict[TopicPartition, EpochEndOffset | ErrorCode]:
        """A source without OffsetsForLeaderEpoch (Tansu) answers every epoch as undefined,
        so the engine truncates to the local high watermark: Kafka's fetcher does the same
        towards a leader that lacks the API (`truncateToHighWatermark`)."""
        try:
            conn = await self._connection()
            if OFFSET_FOR_LEADER_EPOCH not in conn.api_versions:
                return {q.topic_partition: UNDEFINED_EPOCH_END_OFFSET for q in queries}
            results = await super().fetch_epoch_end_offsets(queries)
            other = await self._answered_by_another_topic({q.topic_partition: q.topic_id for q in queries})
            results = {tp: ErrorCode.unknown_topic_id if tp in other else r for tp, r in results.items()}
        except Exception:
            self._moved({q.topic_partition for q in queries})
            raise
        self._moved({tp for tp, r in results.items() if isinstance(r, ErrorCode) and r in LEADER_MOVED_ERRORS})
        return results

    async def fetch_log_offsets(self, query: EpochQuery) -> tuple[int, int] | ErrorCode:
        try:
            result = await super().fetch_log_offsets(query)
            if await self._answered_by_another_topic({query.topic_partition: query.topic_id}):
                result = ErrorCode.unknown_topic_id
        except Exception:
            self._moved({query.topic_partition})
            raise
        if isinstance(result, ErrorCode) and result in LEADER_MOVED_ERRORS:
            self._moved({query.topic_partition})
        return result

    async def _answered_by_another_topic(self, expected: dict[TopicPartition, UUID]) -> set[TopicPartition]:
        """The partitions whose name-keyed answer (OffsetsForLeaderEpoch, ListOffsets, Fetch
        before v13) may come from another topic than the mirror's: the same broker's
        Metadata, asked after the answer, lists the name with another id or not at all. A
        broker's metadata only moves forward and a topic id is never reused, so a name
        still listed with the mirror's id afterwards was that topic when it answered."""
        conn = await self._connection()
        names = sorted({tp.topic for tp in expected})
        listed = ClusterMetadata.from_response(await conn.send(Cluster.metadata_request(conn, names))).topics
        return {tp for tp, topic_id in expected.items()
                if not check_source_topic(topic_id, listed_topic_id(listed.get(tp.topic))).same}

    def _moved(self, tps: set[TopicPartition]) -> None:
        """A source broker that cannot be reached (killed, partitioned) may have lost its
        leadership: like a consumer after a connection failure, look the leaders up again."""
        if tps and self.on_leader_change is not None:
            self.on_leader_change(tps)


class ClientSourceCluster:
    def __init__(self, bootstrap_servers: str, *, client_id: str, request_timeout_ms: int = 30_000,
                 security: ClientSecurity = PLAINTEXT) -> None:
        self.security = security
        self.cluster = Cluster(bootstrap_servers, client_id=client_id, request_timeout_ms=request_timeout_ms,
                               security=security)
        self.request_timeout_ms = request_timeout_ms
        self._auth_failure: str | None = None
        self._epoch_endpoints: dict[tuple[int, str, int], SourceClusterEndPoint] = {}
        """Source leader -> the connection its OffsetsForLeaderEpoch questions share."""

    async def _metadata(self, refresh: bool) -> None:
        """Metadata of every topic: fresh, or loaded once (a pass that starts thousands of
        partitions asks for their leaders together: they share the first load)."""
        await self._refreshed(self.cluster.refresh() if refresh else self.cluster.load())

    async def _refreshed(self, refreshing: Awaitable[T]) -> T:
        """A Metadata answer, with an authentication refusal logged once per distinct message."""
        try:
            fresh = await refreshing
        except KafkaAuthenticationError as exc:
            if str(exc) != self._auth_failure:  # once per distinct refusal; retried every refresh
                log.warning("mirror source %s refused authentication: %s", self.cluster.client_id, exc)
                self._auth_failure = str(exc)
            raise
        if self._auth_failure is not None:
            log.info("mirror source %s: authenticated again", self.cluster.client_id)
            self._auth_failure = None
        return fresh

    async def cluster_id(self, refresh: bool = False) -> str:
        """The id of the latest Metadata answer (any answer carries it); with `refresh`, or
        before any answer, from a request for brokers and cluster id only (no topic listed)."""
        if refresh or self.cluster.metadata.cluster_id is None:
            await self._refreshed(self.cluster.refresh([]))
        return self.cluster.metadata.cluster_id or ""

    async def partition_leader(self, tp: TopicPartition, refresh: bool = False) -> SourceLeader | None:
        """From the latest answer that listed the topic (a pass looks its topics up first);
        Metadata of every topic, loaded once, for a topic no answer has listed yet."""
        if refresh or tp.topic not in self.cluster.metadata.topics:
            await self._metadata(refresh)
        meta = self.cluster.metadata
        topic = meta.topics.get(tp.topic)
        part = topic.partitions.get(tp.partition) if topic is not None else None
        if topic is None or part is None or part.leader < 0:
            return None
        broker = meta.brokers.get(part.leader)
        if broker is None:
            return None
        return SourceLeader(broker.node_id, broker.host, broker.port, topic.topic_id)

    async def topic_id(self, topic: str) -> UUID | None:
        return (await self.topic_ids([topic]))[topic]

    async def topic_ids(self, topics: Sequence[str]) -> dict[str, UUID | None]:
        """`topic_id` of each topic, from one Metadata request naming them (and no others: a
        source's other topics may be wide)."""
        fresh = await self._refreshed(self.cluster.refresh(list(dict.fromkeys(topics))))
        return {topic: listed_topic_id(fresh.topics.get(topic)) for topic in topics}

    def endpoint(self, leader: SourceLeader, client_id: str,
                 on_leader_change: Callable[[set[TopicPartition]], None]) -> LeaderEndPoint:
        return SourceClusterEndPoint(leader.host, leader.port, client_id=client_id,
                                     on_leader_change=on_leader_change, request_timeout_ms=self.request_timeout_ms,
                                     security=self.security)

    async def last_mirrored_epoch(self, mirror_name: str, tp: TopicPartition) -> int | None:
        return (await self.last_mirrored_epochs(mirror_name, [tp]))[tp]

    async def last_mirrored_epochs(self, mirror_name: str, tps: Sequence[TopicPartition]
                                   ) -> dict[TopicPartition, int | None]:
        """The source's LME for each partition, from one DescribeMirrors of the mirror: -1 when
        it knows none, None when the source does not support DescribeMirrors (KIP: both mean
        copy from scratch)."""
        conn = await self.cluster.any_connection()
        if DESCRIBE_MIRRORS not in conn.api_versions:
            return dict.fromkeys(tps)
        request = conn.build_request(DESCRIBE_MIRRORS, mirror_names=(mirror_name,), include_authorized_operations=False)
        response = await conn.send(request)
        if response.error_code == ErrorCode.unsupported_version:
            return dict.fromkeys(tps)
        known: dict[TopicPartition, int] = {}
        for mirror in response.mirrors:
            if mirror.mirror_name != mirror_name or mirror.error_code != ErrorCode.none:
                continue
            for topic in mirror.topics:
                for p in topic.partitions:
                    known[TopicPartition(topic.topic_name, int(p.partition_index))] = int(p.last_mirror_epoch)
        return {tp: known.get(tp, -1) for tp in tps}

    async def epoch_end_offset(self, query: EpochQuery) -> EpochEndOffset | ErrorCode:
        return (await self.epoch_end_offsets([query]))[query.topic_partition]

    async def epoch_end_offsets(self, queries: Sequence[EpochQuery]) -> dict[TopicPartition, EpochEndOffset | ErrorCode]:
        """One OffsetsForLeaderEpoch per source leader for all of `queries`, asked together, on
        a connection kept per leader: a failback of thousands of partitions must not open a
        connection to the source for each."""
        out: dict[TopicPartition, EpochEndOffset | ErrorCode] = {}
        by_leader: dict[tuple[int, str, int], list[EpochQuery]] = {}
        for query in queries:
            leader = await self.partition_leader(query.topic_partition)
            if leader is None:
                out[query.topic_partition] = ErrorCode.leader_not_available
            else:
                by_leader.setdefault((leader.broker_id, leader.host, leader.port), []).append(query)
        for answers in await asyncio.gather(*(self._epoch_endpoint(key).fetch_epoch_end_offsets(asked)
                                              for key, asked in by_leader.items())):
            out.update(answers)
        return out

    def _epoch_endpoint(self, leader: tuple[int, str, int]) -> SourceClusterEndPoint:
        endpoint = self._epoch_endpoints.get(leader)
        if endpoint is None:
            endpoint = self._epoch_endpoints[leader] = SourceClusterEndPoint(
                leader[1], leader[2], client_id=self.cluster.client_id, request_timeout_ms=self.request_timeout_ms,
                security=self.security)
        return endpoint

    async def high_watermarks(self, tps: Sequence[TopicPartition]) -> dict[TopicPartition, int | None]:
        """One ListOffsets per source leader for all of `tps`; when a partition's error fails
        the batch (its topic deleted at the source...), each partition is asked alone, so the
        others are still answered."""
        admin = Admin(self.cluster)
        try:
            listed = await admin.list_offsets(dict.fromkeys(tps, LATEST_TIMESTAMP))
        except KafkaError as exc:
            if isinstance(exc, KafkaAuthenticationError):
                raise
            if len(tps) == 1:
                return {tps[0]: None}
            return {tp: hw for tp in tps for hw in (await self.high_watermarks([tp])).values()}
        return {tp: None if (o := listed.get(tp)) is None or o.offset < 0 else o.offset for tp in tps}

    async def close(self) -> None:
        endpoints, self._epoch_endpoints = list(self._epoch_endpoints.values()), {}
        for endpoint in endpoints:
            await endpoint.close()
        await self.cluster.close()
