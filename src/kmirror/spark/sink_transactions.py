"""Exactly-once micro-batch writes of the sink (`kmirror.sink.exactlyOnce=true`), through
Kafka transactions. The argument is in docs/spark.md ("Exactly-once writes"); in short:

- Task `p` of micro-batch `b` of query `q` writes with `transactional.id =
  <prefix><q>-<p>` (prefix option `kmirror.sink.transactionalIdPrefix`, default
  `kmirror-sink-`; `q` is the query id stored in the checkpoint, stable across restarts).
- InitProducerId with that id fences every earlier attempt of the task (a zombie of a lost
  executor, the attempt Spark gave up on) and completes or aborts its transaction first.
- The group named like the transactional id holds this task's marker: in each committed
  transaction the producer also commits (TxnOffsetCommit) offset `b` for every partition
  it wrote, so the marker and the rows become visible together or not at all.
- After InitProducerId the task reads the marker (OffsetFetch, require_stable). If it is
  at least `b`, batch `b`'s rows of this task are already committed (Spark replays a batch
  whose tasks committed when the query failed before its checkpoint's commit log): the task
  writes nothing. Otherwise it writes its rows and the marker in one transaction and commits.

Spark gives the batch id and query id to tasks as local properties of the micro-batch's job
(`streaming.sql.batchId`, `sql.streaming.queryId`), and guarantees a replayed batch reads the
same offsets; with deterministic processing task `p` gets the same rows (the condition
Spark's own `foreach` sink documents for exactly-once).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext

from kmirror.client.cluster import Cluster
from kmirror.client.groups import OffsetAndMetadata
from kmirror.client.idempotent_producer import IdempotentProducer
from kmirror.client.transactional_producer import TransactionalProducer
from kmirror.spark.options import EXACTLY_ONCE, KafkaOptionError, SinkOptions
from kmirror.types import TopicPartition

QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


def transactional_id(prefix: str, query_id: str, partition_id: int) -> str:
    """The transactional id (and marker group) of task `partition_id` of query `query_id`."""
    return f"{prefix}{query_id}-{partition_id}"


def task_transaction(options: SinkOptions) -> BatchTransaction:
    """This Spark task's transaction, from its TaskContext."""
    context = TaskContext.get()
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY) if context is not None else None
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY) if context is not None else None
    if context is None or not query_id or batch_id is None:
        raise KafkaOptionError(f"option '{EXACTLY_ONCE}' needs a micro-batch streaming query (the task has no "
                               f"query id or batch id; continuous processing is not supported)")
    return BatchTransaction(options.transactional_id_prefix, query_id, int(batch_id), context.partitionId())


@dataclass(frozen=True, slots=True)
class BatchTransaction:
    prefix: str
    query_id: str
    batch_id: int
    partition_id: int

    @property
    def transactional_id(self) -> str:
        return transactional_id(self.prefix, self.query_id, self.partition_id)

    async def last_committed_batch(self, producer: TransactionalProducer) -> int | None:
        """The highest batch id whose rows this task committed, None before its first commit."""
        offsets = await producer.coordinators.list_consumer_group_offsets(self.transactional_id, require_stable=True)
        return max((om.offset for om in offsets.values()), default=None)

    async def run(self, cluster: Cluster, options: SinkOptions, write: Callable[[IdempotentProducer], Awaitable[int]],
                  written_partitions: Callable[[], set[TopicPartition]],
                  rows: Iterator[pa.RecordBatch]) -> tuple[int, bool]:
        """(records written, whether the batch was skipped as already committed)."""
        producer = TransactionalProducer(
            cluster, self.transactional_id, transaction_timeout_ms=options.transaction_timeout_ms,
            compression=options.compression, delivery_timeout_ms=options.delivery_timeout_ms)
        await producer.init_transactions()
        last = await self.last_committed_batch(producer)
        if last is not None and last >= self.batch_id:
            for _ in rows:  # Spark's worker expects its input read to the end
                pass
            return 0, True
        producer.begin_transaction()
        try:
            written = await write(producer)
            partitions = written_partitions()
            if partitions:
                marker = json.dumps({"queryId": self.query_id, "batchId": self.batch_id,
                                     "partitionId": self.partition_id})
                await producer.send_offsets_to_transaction(
                    {tp: OffsetAndMetadata(self.batch_id, metadata=marker) for tp in partitions}, self.transactional_id)
            await producer.commit_transaction()
        except BaseException:
            try:
                await producer.abort_transaction()
            except Exception:  # fenced, or the cluster is gone: the coordinator aborts on timeout
                pass
            raise
        return written, False
