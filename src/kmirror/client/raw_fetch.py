"""Fetch raw record batches of one partition, as a reader that decodes them itself needs.

`PartitionFetcher` sends consumer Fetch requests (replica id -1) for one partition to its
leader and returns the response's records bytes untouched, with the watermarks and, under
read_committed, the aborted transactions Kafka's consumer needs to drop aborted data
(`read_committed.committed_batches`). Leader changes are followed as Kafka's consumer
follows them: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE,
FENCED_LEADER_EPOCH and lost connections refresh the metadata and retry, until
`retry_timeout_ms` runs out. OFFSET_OUT_OF_RANGE is a value, not an exception: the caller
decides (Spark's failOnDataLoss).
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.client.cluster import REFRESH_ERRORS, Cluster
from kmirror.client.errors import KafkaConnectionError, KafkaError, check
from kmirror.protocol.entities import build, nested
from kmirror.types import TopicPartition

FETCH = 1
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    producer_id: int
    first_offset: int


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    topic_partition: TopicPartition
    fetch_offset: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: tuple[AbortedTransaction, ...]
    records: bytes

    @property
    def offset_out_of_range(self) -> bool:
        return self.error_code == ErrorCode.offset_out_of_range


async def send_consumer_fetch(
    conn: Any, offsets: Mapping[TopicPartition, int], *, max_wait_ms: int, min_bytes: int, max_bytes: int,
    isolation_level: int, partition_max_bytes: int, context: str,
) -> Any:
    """One consumer Fetch (replica id -1, no fetch session) of `offsets`' partitions, each
    from its offset, in the version `conn` negotiated; the response, its top-level error
    raised. Partition errors are the caller's to read."""
    rt = conn.request_type(FETCH)
    Topic, Partition = nested(rt, "FetchTopic"), nested(rt, "FetchPartition")
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in offsets:
        by_topic.setdefault(tp.topic, []).append(tp)
    request = build(
        rt,
        cluster_id=None,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=tuple(
            build(Topic, topic=topic, partitions=tuple(
                build(Partition, partition=tp.partition, current_leader_epoch=-1, fetch_offset=offsets[tp],
                      last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=partition_max_bytes)
                for tp in tps))
            for topic, tps in by_topic.items()
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    response = await conn.send(request, timeout_ms=max_wait_ms + conn.request_timeout_ms)
    check(getattr(response, "error_code", 0), context=context)
    return response


def aborted_transactions_of(partition: Any) -> tuple[AbortedTransaction, ...]:
    """A Fetch response partition's aborted transactions (none before Fetch v4)."""
    return tuple(AbortedTransaction(int(a.producer_id), int(a.first_offset))
                 for a in (getattr(partition, "aborted_transactions", None) or ()))


class PartitionFetcher:
    """Consumer Fetch of one partition at a time from its leader; no decoding."""

    def __init__(
        self,
        cluster: Cluster,
        topic_partition: TopicPartition,
        *,
        isolation_level: int = READ_UNCOMMITTED,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 64 * 1024 * 1024,
        partition_max_bytes: int = 8 * 1024 * 1024,
        retry_timeout_ms: int = 120_000,
        retry_backoff_ms: int = 200,
    ) -> None:
        self.cluster = cluster
        self.topic_partition = topic_partition
        self.isolation_level = isolation_level
        self.max_wait_ms = max_wait_ms
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.partition_max_bytes = partition_max_bytes
        self.retry_timeout_ms = retry_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms

    async def fetch(self, offset: int) -> FetchedPartition:
        """One Fetch at `offset`, retried across leader changes until `retry_timeout_ms`."""
        deadline = time.monotonic() + self.retry_timeout_ms / 1000
        tp = self.topic_partition
        while True:
            try:
                conn = await self.cluster.leader_connection(tp)
                fetched = await self._fetch_once(conn, offset)
                if fetched.error_code not in REFRESH_ERRORS:
                    return fetched
                error: Exception = KafkaError(fetched.error_code, context=f"Fetch {tp} at offset {offset}")
            except KafkaConnectionError as exc:
                error = exc
            except KafkaError as exc:
                if exc.error_code not in REFRESH_ERRORS:
                    raise
                error = exc
            if time.monotonic() >= deadline:
                raise error
            await asyncio.sleep(self.retry_backoff_ms / 1000)
            try:
                await self.cluster.refresh([tp.topic])
            except KafkaConnectionError:
                pass

    async def _fetch_once(self, conn: Any, offset: int) -> FetchedPartition:
        tp = self.topic_partition
        response = await send_consumer_fetch(
            conn, {tp: offset}, max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes, max_bytes=self.max_bytes,
            isolation_level=self.isolation_level, partition_max_bytes=self.partition_max_bytes,
            context=f"Fetch {tp}")
        for t in response.responses:
            if t.topic != tp.topic:
                continue
            for p in t.partitions:
                if int(p.partition_index) != tp.partition:
                    continue
                aborted = aborted_transactions_of(p)
                return FetchedPartition(
                    topic_partition=tp,
                    fetch_offset=offset,
                    error_code=int(p.error_code),
                    high_watermark=int(p.high_watermark),
                    last_stable_offset=int(getattr(p, "last_stable_offset", -1)),
                    log_start_offset=int(getattr(p, "log_start_offset", -1)),
                    aborted_transactions=aborted,
                    records=p.records or b"",
                )
        raise KafkaError(ErrorCode.unknown_server_error, "the Fetch response does not name the partition",
                         context=f"Fetch {tp}")
