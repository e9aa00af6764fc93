"""A transactional producer (Kafka's `transactional.id`, KIP-98), as Kafka's `KafkaProducer`
drives a transaction: `init_transactions`, `begin_transaction`, `send`,
`send_offsets_to_transaction`, `commit_transaction` / `abort_transaction`.

`init_transactions` finds the transaction coordinator (FindCoordinator, key type 1) and
sends InitProducerId with the transactional id: the coordinator completes or aborts any
transaction a previous producer of that id left open and bumps the epoch, so that producer
(a zombie) is fenced from then on. A partition is added to the transaction
(AddPartitionsToTxn) before its first batch; group offsets join it through AddOffsetsToTxn
and TxnOffsetCommit to the group's coordinator, and become visible only with the commit.
Coordinator errors that Kafka's producer retries (COORDINATOR_NOT_AVAILABLE,
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS) are retried until
`delivery_timeout_ms`; PRODUCER_FENCED / INVALID_PRODUCER_EPOCH and every other error raise
`KafkaError`, after which the transaction can only be aborted by a new producer of the id.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.client.cluster import Cluster
from kmirror.client.connection import BrokerConnection
from kmirror.client.errors import KafkaConnectionError, KafkaError, check
from kmirror.client.groups import GroupAdmin, OffsetAndMetadata
from kmirror.client.idempotent_producer import IdempotentProducer
from kmirror.client.producer import RecordMetadata
from kmirror.protocol.entities import build, nested
from kmirror.records.builder import SimpleRecord
from kmirror.types import TopicPartition

INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 22, 24, 25, 26, 28
TRANSACTION_KEY_TYPE = 1
_COORDINATOR_MOVED = frozenset({int(ErrorCode.coordinator_not_available), int(ErrorCode.not_coordinator)})
_RETRY = _COORDINATOR_MOVED | {int(ErrorCode.coordinator_load_in_progress), int(ErrorCode.concurrent_transactions)}


class _Coordinators(GroupAdmin):
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster


class TransactionalProducer(IdempotentProducer):
    def __init__(self, cluster: Cluster, transactional_id: str, *, transaction_timeout_ms: int = 60_000,
                 **kwargs: Any) -> None:
        super().__init__(cluster, **kwargs)
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.coordinators = _Coordinators(cluster)
        self._txn_coordinator: BrokerConnection | None = None
        self._in_transaction = False
        self._started = False  # the coordinator knows the transaction (a partition or a group joined it)
        self._partitions: set[TopicPartition] = set()

    async def _coordinator_call(self, context: str, call: Callable[[BrokerConnection], Awaitable[Any]]) -> Any:
        """Send to the transaction coordinator, finding it again when it moved; retry Kafka's
        retriable coordinator errors until the delivery timeout."""
        deadline = time.monotonic() + self.delivery_timeout_ms / 1000
        while True:
            try:
                if self._txn_coordinator is None or not self._txn_coordinator.connected:
                    self._txn_coordinator = await self.coordinators.find_coordinator(
                        self.transactional_id or "", TRANSACTION_KEY_TYPE)
                response = await call(self._txn_coordinator)
                code = int(getattr(response, "error_code", 0))
                if code not in _RETRY:
                    check(code, None, context)
                    return response
                if code in _COORDINATOR_MOVED:
                    self._txn_coordinator = None
                error: Exception = KafkaError(code, None, context)
            except KafkaConnectionError as exc:
                self._txn_coordinator, error = None, exc
            if time.monotonic() >= deadline:
                raise error
            await asyncio.sleep(self.retry_backoff_ms / 1000)

    async def init(self) -> None:
        await self.init_transactions()

    async def init_transactions(self) -> None:
        """InitProducerId with the transactional id: fences earlier producers of the id."""
        response = await self._coordinator_call(f"InitProducerId {self.transactional_id}", lambda conn: conn.send(
            conn.build_request(INIT_PRODUCER_ID, transactional_id=self.transactional_id,
                               transaction_timeout=datetime.timedelta(milliseconds=self.transaction_timeout_ms),
                               producer_id=-1, producer_epoch=-1)))
        self.producer_id = int(response.producer_id)
        self.producer_epoch = int(response.producer_epoch)
        self._sequences.clear()

    def begin_transaction(self) -> None:
        if self.producer_id < 0:
            raise RuntimeError("init_transactions() must complete before begin_transaction()")
        if self._in_transaction:
            raise RuntimeError("a transaction is already in progress")
        self._in_transaction = True
        self._started = False
        self._partitions.clear()

    async def send(self, batches: Mapping[TopicPartition, Sequence[SimpleRecord]]) -> list[RecordMetadata]:
        await self._add_partitions(batches)
        return await super().send(batches)

    async def send_records(self, sections: Mapping[TopicPartition, tuple[bytes | memoryview, int]]) -> list[RecordMetadata]:
        await self._add_partitions(sections)
        return await super().send_records(sections)

    async def _add_partitions(self, partitions: Mapping[TopicPartition, object] | Sequence[TopicPartition]) -> None:
        if not self._in_transaction:
            raise RuntimeError("send() outside a transaction: call begin_transaction() first")
        new = sorted(set(partitions) - self._partitions)
        if not new:
            return
        by_topic: dict[str, list[int]] = {}
        for tp in new:
            by_topic.setdefault(tp.topic, []).append(tp.partition)

        async def add(conn: BrokerConnection) -> Any:
            rt = conn.request_type(ADD_PARTITIONS_TO_TXN)
            Topic = nested(rt, "AddPartitionsToTxnTopic")
            topics = tuple(build(Topic, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())
            response = await conn.send(build(
                rt, v3_and_below_transactional_id=self.transactional_id, v3_and_below_producer_id=self.producer_id,
                v3_and_below_producer_epoch=self.producer_epoch, v3_and_below_topics=topics))
            return _FirstError(response)

        self._started = True
        await self._coordinator_call(f"AddPartitionsToTxn {self.transactional_id}", add)
        self._partitions.update(new)

    async def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                                          group_id: str) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit at the group's coordinator (generation -1, no
        member: Kafka's `send_offsets_to_transaction(offsets, group_id)`)."""
        if not self._in_transaction:
            raise RuntimeError("send_offsets_to_transaction() outside a transaction")
        self._started = True
        await self._coordinator_call(f"AddOffsetsToTxn {self.transactional_id}", lambda conn: conn.send(
            conn.build_request(ADD_OFFSETS_TO_TXN, transactional_id=self.transactional_id,
                               producer_id=self.producer_id, producer_epoch=self.producer_epoch, group_id=group_id)))
        by_topic: dict[str, list[tuple[int, OffsetAndMetadata]]] = {}
        for tp, om in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append((tp.partition, om))
        deadline = time.monotonic() + self.delivery_timeout_ms / 1000
        while True:
            conn = await self.coordinators.find_coordinator(group_id)
            rt = conn.request_type(TXN_OFFSET_COMMIT)
            Topic, Partition = nested(rt, "TxnOffsetCommitRequestTopic"), nested(rt, "TxnOffsetCommitRequestPartition")
            response = await conn.send(build(
                rt, transactional_id=self.transactional_id, group_id=group_id, producer_id=self.producer_id,
                producer_epoch=self.producer_epoch, generation_id=-1, member_id="", group_instance_id=None,
                topics=tuple(build(Topic, name=topic, partitions=tuple(
                    build(Partition, partition_index=p, committed_offset=om.offset,
                          committed_leader_epoch=om.leader_epoch, committed_metadata=om.metadata)
                    for p, om in parts)) for topic, parts in by_topic.items())))
            codes = [int(p.error_code) for t in response.topics for p in t.partitions]
            code = next((c for c in codes if c), 0)
            if code not in _RETRY or time.monotonic() >= deadline:
                check(code, None, f"TxnOffsetCommit {group_id}")
                return
            await asyncio.sleep(self.retry_backoff_ms / 1000)

    async def commit_transaction(self) -> None:
        await self._end(True)

    async def abort_transaction(self) -> None:
        await self._end(False)

    async def _end(self, committed: bool) -> None:
        if not self._in_transaction:
            raise RuntimeError("no transaction in progress")
        if self._started:  # as Kafka's producer: a transaction the coordinator never saw ends locally
            await self._coordinator_call(f"EndTxn {self.transactional_id}", lambda conn: conn.send(
                conn.build_request(END_TXN, transactional_id=self.transactional_id, producer_id=self.producer_id,
                                   producer_epoch=self.producer_epoch, committed=committed)))
        self._in_transaction = False
        self._partitions.clear()


class _FirstError:
    """An AddPartitionsToTxn answer seen through its first partition error (Kafka answers
    OPERATION_NOT_ATTEMPTED for the partitions beside a failing one)."""

    def __init__(self, response: Any) -> None:
        codes = [int(p.partition_error_code) for t in response.results_by_topic_v3_and_below
                 for p in t.results_by_partition]
        failing = [c for c in codes if c and c != int(ErrorCode.operation_not_attempted)]
        self.error_code = failing[0] if failing else next((c for c in codes if c), 0)
