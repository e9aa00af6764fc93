"""An idempotent producer (Kafka's `enable.idempotence=true`, KIP-98), without transactions.

`init()` asks any broker for a producer id (InitProducerId with no transactional id).
Each partition's batches carry that id, epoch and consecutive sequence numbers; a batch is
built once and re-sent unchanged after a retriable error (a leader change, a lost
connection, a timed-out request), so the broker recognises a re-sent batch it already
appended and answers with the original offsets instead of writing it twice. One request
per partition is in flight at a time, so sequences reach the leader in order. A batch
that cannot be delivered within `delivery_timeout_ms`, or a non-retriable error
(OUT_OF_ORDER_SEQUENCE_NUMBER, a record too large, authorization) raises `KafkaError`
with the broker's error, as Kafka's producer fails the send.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kmirror.client.cluster import REFRESH_ERRORS, Cluster
from kmirror.client.errors import KafkaConnectionError, KafkaError, check
from kmirror.client.producer import RecordMetadata
from kmirror.protocol.entities import build, nested
from kmirror.records.builder import SimpleRecord, build_batch, build_batch_from_records
from kmirror.types import TopicPartition

PRODUCE = 0
INIT_PRODUCER_ID = 22
_INT32_MAX = 2**31 - 1


class IdempotentProducer:
    def __init__(
        self,
        cluster: Cluster,
        *,
        compression: int = 0,
        request_timeout_ms: int = 30_000,
        delivery_timeout_ms: int = 120_000,
        retry_backoff_ms: int = 100,
    ) -> None:
        self.cluster = cluster
        self.compression = compression
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.producer_id = -1
        self.producer_epoch = -1
        self.transactional_id: str | None = None  # set by TransactionalProducer: batches become transactional
        self._sequences: dict[TopicPartition, int] = {}

    async def init(self) -> None:
        """Obtain a producer id (retried while the broker loads its id block)."""
        deadline = time.monotonic() + self.delivery_timeout_ms / 1000
        while True:
            try:
                conn = await self.cluster.any_connection()
                response = await conn.send(conn.build_request(
                    INIT_PRODUCER_ID, transactional_id=None, transaction_timeout=datetime.timedelta(milliseconds=-1),
                    producer_id=-1, producer_epoch=-1))
                check(response.error_code, context="InitProducerId")
                self.producer_id = int(response.producer_id)
                self.producer_epoch = int(response.producer_epoch)
                return
            except (KafkaError, KafkaConnectionError) as exc:
                retriable = isinstance(exc, KafkaConnectionError) or exc.retriable
                if not retriable or time.monotonic() >= deadline:
                    raise
            await asyncio.sleep(self.retry_backoff_ms / 1000)

    async def send(self, batches: Mapping[TopicPartition, Sequence[SimpleRecord]]) -> list[RecordMetadata]:
        """Append each partition's records as one batch; returns when every batch is acknowledged."""
        if self.producer_id < 0:
            await self.init()
        now_ms = time.time_ns() // 1_000_000
        encoded: dict[TopicPartition, tuple[bytes, int]] = {}
        for tp, records in batches.items():
            if not records:
                continue
            sequence = self._sequences.get(tp, 0)
            encoded[tp] = (build_batch(records, compression=self.compression, producer_id=self.producer_id,
                                       producer_epoch=self.producer_epoch, base_sequence=sequence, now_ms=now_ms,
                                       is_transactional=self.transactional_id is not None),
                           len(records))
            self._sequences[tp] = (sequence + len(records)) & _INT32_MAX
        return await self._deliver(encoded)

    async def send_records(self, sections: Mapping[TopicPartition, tuple[bytes | memoryview, int]]) -> list[RecordMetadata]:
        """As `send`, for records already encoded: per partition a records section (Kafka's
        record layout, offset deltas 0..n-1, timestamp deltas 0) and its record count; each
        becomes one batch stamped with the current time."""
        if self.producer_id < 0:
            await self.init()
        now_ms = time.time_ns() // 1_000_000
        planned: list[tuple[TopicPartition, bytes | memoryview, int, int]] = []
        for tp, (records, count) in sections.items():
            sequence = self._sequences.get(tp, 0)
            planned.append((tp, records, count, sequence))
            self._sequences[tp] = (sequence + count) & _INT32_MAX

        def build() -> dict[TopicPartition, tuple[bytes, int]]:
            return {tp: (build_batch_from_records(
                records, count, base_timestamp=now_ms, max_timestamp=now_ms, compression=self.compression,
                producer_id=self.producer_id, producer_epoch=self.producer_epoch, base_sequence=sequence,
                is_transactional=self.transactional_id is not None), count)
                for tp, records, count, sequence in planned}

        # The C codecs release the GIL: compressing in a thread overlaps the caller's next work.
        encoded = await asyncio.to_thread(build) if self.compression else build()
        return await self._deliver(encoded)

    async def _deliver(self, encoded: Mapping[TopicPartition, tuple[bytes, int]]) -> list[RecordMetadata]:
        results: list[RecordMetadata] = []
        deadline = time.monotonic() + self.delivery_timeout_ms / 1000
        pending = dict(encoded)
        while pending:
            groups: dict[int, tuple[Any, list[TopicPartition]]] = {}
            retry: dict[TopicPartition, tuple[bytes, int]] = {}
            last_error: Exception | None = None
            for tp in sorted(pending):
                try:
                    conn = await self.cluster.leader_connection(tp)
                except (KafkaError, KafkaConnectionError) as exc:
                    if isinstance(exc, KafkaError) and exc.error_code not in REFRESH_ERRORS:
                        raise
                    retry[tp], last_error = pending[tp], exc
                    continue
                groups.setdefault(id(conn), (conn, []))[1].append(tp)
            for conn, tps in groups.values():
                try:
                    failed = await self._produce(conn, tps, pending, results)
                except KafkaConnectionError as exc:
                    retry.update({tp: pending[tp] for tp in tps})
                    last_error = exc
                    continue
                for tp, error in failed:
                    if not error.retriable:
                        raise error
                    retry[tp], last_error = pending[tp], error
            if not retry:
                break
            if time.monotonic() >= deadline:
                assert last_error is not None
                raise last_error
            await asyncio.sleep(self.retry_backoff_ms / 1000)
            try:
                await self.cluster.refresh(sorted({tp.topic for tp in retry}))
            except KafkaConnectionError:
                pass
            pending = retry
        return results

    async def _produce(self, conn: Any, tps: list[TopicPartition], pending: Mapping[TopicPartition, tuple[bytes, int]],
                       results: list[RecordMetadata]) -> list[tuple[TopicPartition, KafkaError]]:
        rt = conn.request_type(PRODUCE)
        Topic, Partition = nested(rt, "TopicProduceData"), nested(rt, "PartitionProduceData")
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = build(
            rt,
            transactional_id=self.transactional_id,
            acks=-1,
            timeout=datetime.timedelta(milliseconds=self.request_timeout_ms),
            topic_data=tuple(
                build(Topic, name=topic, partition_data=tuple(
                    build(Partition, index=p, records=pending[TopicPartition(topic, p)][0]) for p in parts))
                for topic, parts in by_topic.items()
            ),
        )
        response = await conn.send(request, timeout_ms=self.request_timeout_ms + conn.request_timeout_ms)
        failed: list[tuple[TopicPartition, KafkaError]] = []
        for t in response.responses:
            for p in t.partition_responses:
                tp = TopicPartition(t.name, int(p.index))
                try:
                    check(p.error_code, getattr(p, "error_message", None), f"Produce to {tp}")
                except KafkaError as exc:
                    failed.append((tp, exc))
                    continue
                results.append(RecordMetadata(tp, int(p.base_offset), pending[tp][1]))
        return failed
