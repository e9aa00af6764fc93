"""The sink: `df.write.format("kmirror")` and `writeStream`, Spark's Kafka sink columns.

Columns (Spark's `KafkaWriter.validateQuery`): `value` (string or binary, required),
`key` (string or binary), `topic` (string; required unless the `topic` option is set, which
then wins), `headers` (array<struct<key:string,value:binary>>), `partition` (int; when null
or absent the record goes to Kafka's default partition: murmur2 of the key, or a sticky
partition per task for null keys). Other columns are ignored.

Each task writes with a producer of its own, from Arrow batches: rows are grouped by target
partition (in their order) and encoded column-wise (`sink_records`), one produce request in
flight while the next rows are encoded. By default the producer is idempotent (a batch
re-sent after a leader change is not written twice) and the sink at-least-once, as Spark's
Kafka sink: a task Spark runs again writes its rows again. With `kmirror.sink.exactlyOnce`
a streaming write is exactly-once (`sink_transactions`, docs/spark.md).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from kmirror.client.cluster import Cluster
from kmirror.client.configs import cluster_from_configs
from kmirror.client.errors import KafkaError
from kmirror.client.idempotent_producer import IdempotentProducer
from kmirror.protocol.errors import ErrorCode
from kmirror.spark.delegation_token import driver_token
from kmirror.spark.options import (
    DELEGATION_TOKEN,
    EXACTLY_ONCE,
    KafkaOptionError,
    SinkOptions,
    parse_sink_options,
)
from kmirror.spark.sink_records import EncodedRecords, batches_of, encode_records, partitions_for_keys
from kmirror.spark.sink_transactions import BatchTransaction, task_transaction
from kmirror.types import TopicPartition

HEADERS_TYPE = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))
_RECORD_OVERHEAD = 12  # bytes a record adds to its key and value (length, attributes, deltas, lengths)


@dataclass(frozen=True)
class WrittenRecords(WriterCommitMessage):
    records: int
    skipped_batch: bool = False  # exactly-once: this task's rows of the batch were committed before


def validate_columns(schema: StructType, options: SinkOptions) -> None:
    """Spark's KafkaWriter checks, one message per mistake."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "topic" not in fields and options.topic is None:
        raise KafkaOptionError("topic option required when no 'topic' attribute is present. Use the 'topic' option "
                               "for setting a topic.")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise KafkaOptionError(f"topic attribute type must be a string, got {fields['topic'].simpleString()}")
    if "value" not in fields:
        raise KafkaOptionError("required attribute 'value' not found")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], StringType | BinaryType):
            raise KafkaOptionError(f"{name} attribute type must be a string or binary, got "
                                   f"{fields[name].simpleString()}")
    if "headers" in fields and fields["headers"] != HEADERS_TYPE:
        raise KafkaOptionError(f"headers attribute type must be array<struct<key:string,value:binary>>, got "
                               f"{fields['headers'].simpleString()}")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise KafkaOptionError(f"partition attribute type must be an int, got {fields['partition'].simpleString()}")


class _TaskWriter:
    """Writes one task's rows; connections live only inside `write`."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        self._partition_counts: dict[str, int] = {}
        self._sticky: dict[str, int] = {}
        self._pending: dict[TopicPartition, list[EncodedRecords]] = {}
        self._pending_bytes = 0
        self._in_flight: asyncio.Task[int] | None = None
        self.partitions_written: set[TopicPartition] = set()

    async def _partition_count(self, cluster: Cluster, topic: str) -> int:
        count = self._partition_counts.get(topic)
        if count is None:
            metadata = await cluster.refresh([topic])
            meta = metadata.topics.get(topic)
            if meta is None or meta.error_code or not meta.partitions:
                code = meta.error_code if meta is not None and meta.error_code else ErrorCode.unknown_topic_or_partition
                raise KafkaError(code, f"topic '{topic}' does not exist", context=f"Produce to {topic}")
            count = self._partition_counts[topic] = len(meta.partitions)
        return count

    async def write(self, producer: IdempotentProducer, batches: Iterator[pa.RecordBatch]) -> int:
        """Every row of `batches`, acknowledged by the brokers; returns the record count."""
        written = 0
        for batch in batches:
            if batch.num_rows:
                await self._add(producer, batch)
            if self._pending_bytes >= self.options.batch_size:
                written += await self._flush(producer)
        written += await self._flush(producer)
        if self._in_flight is not None:
            written += await self._in_flight
            self._in_flight = None
        return written

    async def _add(self, producer: IdempotentProducer, batch: pa.RecordBatch) -> None:
        columns = {name.lower(): batch.column(i) for i, name in enumerate(batch.schema.names)}
        groups: list[tuple[str, np.ndarray | None]]
        if self.options.topic is not None:
            groups = [(self.options.topic, None)]
        else:
            topics = columns["topic"]
            if topics.null_count:
                raise KafkaOptionError("null topic present in the data. Use the 'topic' option for setting a "
                                       "default topic.")
            encoded_topics = pc.dictionary_encode(topics)
            indices = encoded_topics.indices.to_numpy(zero_copy_only=False)
            groups = [(str(t), np.nonzero(indices == i)[0]) for i, t in enumerate(encoded_topics.dictionary.to_pylist())]
        for topic, rows in groups:
            count = await self._partition_count(producer.cluster, topic)
            part = columns if rows is None else {k: v.take(pa.array(rows)) for k, v in columns.items()}
            self._add_topic_rows(topic, count, part)

    def _add_topic_rows(self, topic: str, count: int, columns: Mapping[str, pa.Array]) -> None:
        values = columns["value"]
        n = len(values)
        keys = columns.get("key")
        headers = columns.get("headers")
        partitions = np.full(n, self._sticky.setdefault(topic, random.randrange(count)), dtype=np.int32)
        if keys is not None and keys.null_count < n:
            keyed = pc.is_valid(keys).to_numpy(zero_copy_only=False)
            partitions[keyed] = partitions_for_keys(keys.filter(pa.array(keyed)), count)
        if "partition" in columns and columns["partition"].null_count < n:
            given = columns["partition"]
            explicit = pc.is_valid(given).to_numpy(zero_copy_only=False)
            chosen = given.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int32)
            bad = explicit & ((chosen < 0) | (chosen >= count))
            if bad.any():
                raise KafkaError(ErrorCode.unknown_topic_or_partition,
                                 f"partition {int(chosen[bad][0])} does not exist (the topic has {count})",
                                 context=f"Produce to {topic}")
            partitions[explicit] = chosen[explicit]
        order = np.argsort(partitions, kind="stable")
        sorted_partitions = partitions[order]
        bounds = np.flatnonzero(np.diff(sorted_partitions)) + 1
        starts = np.concatenate([[0], bounds])
        ends = np.concatenate([bounds, [n]])
        size = _approximate_bytes(keys, values, headers)
        per_batch = max(1, int(self.options.batch_size * n // max(size, 1)))
        identity = len(starts) == 1 and bool((order == np.arange(n)).all())
        for start, end in zip(starts, ends, strict=True):
            tp = TopicPartition(topic, int(sorted_partitions[start]))
            take = None if identity else pa.array(order[start:end])
            encoded = encode_records(
                keys if keys is None or take is None else keys.take(take),
                values if take is None else values.take(take),
                headers if headers is None or take is None else headers.take(take), per_batch)
            sections = list(batches_of(encoded, per_batch))
            self._pending.setdefault(tp, []).extend(sections)
            self._pending_bytes += sum(len(s.records) for s in sections)

    async def _flush(self, producer: IdempotentProducer) -> int:
        """Hand the pending batches to a send task (after the previous one completed), so that
        the next rows are encoded while these are on the wire."""
        written = 0
        if self._in_flight is not None:
            written = await self._in_flight
            self._in_flight = None
        if self._pending:
            pending, self._pending, self._pending_bytes = self._pending, {}, 0
            self.partitions_written.update(pending)
            self._in_flight = asyncio.create_task(_send_rounds(producer, pending))
            await asyncio.sleep(0)  # let the task write its first requests
        return written


async def _send_rounds(producer: IdempotentProducer, pending: dict[TopicPartition, list[EncodedRecords]]) -> int:
    """One batch per partition per produce round, in order (Kafka's one batch per partition
    per request)."""
    written = 0
    round_index = 0
    while True:
        sections = {tp: (s[round_index].records, s[round_index].count) for tp, s in pending.items()
                    if round_index < len(s)}
        if not sections:
            return written
        written += sum(m.record_count for m in await producer.send_records(sections))
        round_index += 1


def _approximate_bytes(keys: pa.Array | None, values: pa.Array, headers: pa.Array | None) -> int:
    total = values.nbytes + _RECORD_OVERHEAD * len(values)
    if keys is not None:
        total += keys.nbytes
    if headers is not None:
        total += headers.nbytes
    return int(total)


async def _write_task(options: SinkOptions, iterator: Iterator[pa.RecordBatch],
                      transaction: BatchTransaction | None) -> WrittenRecords:
    cluster = cluster_from_configs(options.client_configs, client_id="kmirror-spark-writer")
    writer = _TaskWriter(options)
    try:
        if transaction is None:
            producer = IdempotentProducer(cluster, compression=options.compression,
                                          delivery_timeout_ms=options.delivery_timeout_ms)
            return WrittenRecords(await writer.write(producer, iterator))
        written, skipped = await transaction.run(cluster, options, lambda producer: writer.write(producer, iterator),
                                                 lambda: writer.partitions_written, iterator)
        return WrittenRecords(written, skipped)
    finally:
        await cluster.close()


def _write(options: SinkOptions, iterator: Iterator[pa.RecordBatch], streaming: bool) -> WrittenRecords:
    transaction = task_transaction(options) if options.exactly_once and streaming else None
    result: WrittenRecords = asyncio.run(_write_task(options, iterator, transaction))
    return result


class KafkaWriter(DataSourceArrowWriter):
    def __init__(self, raw_options: Mapping[str, str], schema: StructType, overwrite: bool = False) -> None:
        if overwrite:
            raise KafkaOptionError("Save mode Overwrite not allowed for Kafka. Allowed save modes are Append and "
                                   "ErrorIfExists (default).")
        self.options = parse_sink_options(raw_options)
        if self.options.exactly_once:
            raise KafkaOptionError(f"option '{EXACTLY_ONCE}' applies to streaming writes (writeStream): a batch "
                                   f"write has no batch id to commit with")
        validate_columns(schema, self.options)
        mechanism = self.options.delegation_token_mechanism
        if mechanism is not None:  # made on the driver: the pickled writer holds the token, not the driver's login
            configs = driver_token(self.options.client_configs, mechanism).task_configs()
            self.options = replace(self.options, client_configs=configs)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenRecords:
        return _write(self.options, iterator, streaming=False)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Records are acknowledged by the brokers as tasks write them: nothing left to commit."""


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, raw_options: Mapping[str, str], schema: StructType) -> None:
        self.options = parse_sink_options(raw_options)
        if self.options.delegation_token_mechanism is not None:
            raise KafkaOptionError(f"option '{DELEGATION_TOKEN}' applies to reads and batch writes: a streaming "
                                   f"write's tasks keep the login they start with, which a token would not outlive")
        validate_columns(schema, self.options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenRecords:
        return _write(self.options, iterator, streaming=True)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Each task committed its own rows (its transaction, or acknowledged idempotent writes)."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Committed rows stay: with exactly-once, the batch's replay skips the tasks whose
        transaction committed (their marker holds the batch id) and writes the others."""
