"""A minimal producer: one RecordBatch v2 per partition per request, acks 0/1/all.

Not idempotent (producer id -1, no sequences): retries after a retriable error may
duplicate, exactly as a Kafka producer with `enable.idempotence=false`. Keyed records go
to Kafka's murmur2 partition; unkeyed ones to a round-robin partition per call.
"""

from __future__ import annotations

import datetime
import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kmirror.client.cluster import REFRESH_ERRORS, Cluster
from kmirror.client.errors import KafkaError, check
from kmirror.client.partitioner import partition_for_key
from kmirror.protocol.entities import build, nested
from kmirror.records.builder import SimpleRecord, build_batch
from kmirror.types import TopicPartition

PRODUCE = 0


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    topic_partition: TopicPartition
    base_offset: int  # -1 with acks=0
    record_count: int


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Producer:
    def __init__(
        self,
        cluster: Cluster,
        *,
        acks: int = -1,
        compression: int = 0,
        timeout_ms: int = 30_000,
        retries: int = 3,
        now_ms: Callable[[], int] = _wall_clock_ms,
    ) -> None:
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be -1 (all), 0 or 1, got {acks}")
        self.cluster = cluster
        self.acks = acks
        self.compression = compression
        self.timeout_ms = timeout_ms
        self.retries = retries
        self._now_ms = now_ms
        self._round_robin = itertools.count()

    async def partition_count(self, topic: str) -> int:
        t = self.cluster.metadata.topics.get(topic)
        if t is None or not t.partitions:
            await self.cluster.refresh([topic])
            t = self.cluster.metadata.topics.get(topic)
        if t is None or t.error_code or not t.partitions:
            raise KafkaError(t.error_code if t and t.error_code else 3, context=topic)
        return len(t.partitions)

    async def send(
        self,
        topic: str,
        records: Sequence[SimpleRecord],
        partition: int | None = None,
    ) -> list[RecordMetadata]:
        """Send `records` to `topic`; with no `partition`, partition each by key."""
        count = await self.partition_count(topic)
        by_partition: dict[int, list[SimpleRecord]] = {}
        unkeyed_partition = next(self._round_robin) % count
        for record in records:
            if partition is not None:
                p = partition
            elif record.key is not None:
                p = partition_for_key(record.key, count)
            else:
                p = unkeyed_partition
            by_partition.setdefault(p, []).append(record)
        return await self.send_batches({TopicPartition(topic, p): rs for p, rs in by_partition.items()})

    async def send_batches(self, batches: dict[TopicPartition, list[SimpleRecord]]) -> list[RecordMetadata]:
        pending = {tp: rs for tp, rs in batches.items() if rs}
        results: list[RecordMetadata] = []
        now = self._now_ms()
        encoded = {tp: build_batch(rs, compression=self.compression, now_ms=now) for tp, rs in pending.items()}
        for attempt in range(self.retries + 1):
            retry: dict[TopicPartition, list[SimpleRecord]] = {}
            groups: dict[int, tuple[Any, list[TopicPartition]]] = {}
            for tp in pending:
                conn = await self.cluster.leader_connection(tp)
                groups.setdefault(id(conn), (conn, []))[1].append(tp)
            for conn, tps in groups.values():
                for tp, error in await self._produce(conn, tps, encoded, pending, results):
                    if error.error_code in REFRESH_ERRORS and attempt < self.retries:
                        retry[tp] = pending[tp]
                    else:
                        raise error
            if not retry:
                break
            await self.cluster.refresh(sorted({tp.topic for tp in retry}))
            pending = retry
        return results

    async def _produce(
        self,
        conn: Any,
        tps: Iterable[TopicPartition],
        encoded: dict[TopicPartition, bytes],
        pending: dict[TopicPartition, list[SimpleRecord]],
        results: list[RecordMetadata],
    ) -> list[tuple[TopicPartition, KafkaError]]:
        rt = conn.request_type(PRODUCE)
        Topic, Partition = nested(rt, "TopicProduceData"), nested(rt, "PartitionProduceData")
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(tps):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = build(
            rt,
            transactional_id=None,
            acks=self.acks,
            timeout=datetime.timedelta(milliseconds=self.timeout_ms),
            topic_data=tuple(
                build(Topic, name=topic, partition_data=tuple(
                    build(Partition, index=p, records=encoded[TopicPartition(topic, p)]) for p in parts
                ))
                for topic, parts in by_topic.items()
            ),
        )
        if self.acks == 0:
            await conn.send(request, expect_response=False)
            results.extend(RecordMetadata(tp, -1, len(pending[tp])) for tp in sorted(tps))
            return []
        response = await conn.send(request, timeout_ms=self.timeout_ms + conn.request_timeout_ms)
        failed: list[tuple[TopicPartition, KafkaError]] = []
        for t in response.responses:
            for p in t.partition_responses:
                tp = TopicPartition(t.name, int(p.index))
                try:
                    check(p.error_code, getattr(p, "error_message", None), str(tp))
                except KafkaError as exc:
                    failed.append((tp, exc))
                    continue
                results.append(RecordMetadata(tp, int(p.base_offset), len(pending[tp])))
        return failed
