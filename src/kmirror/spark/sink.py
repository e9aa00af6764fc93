"""The sink: `df.write.format("kmirror")` and `writeStream`, Spark's Kafka sink columns.

Columns (Spark's `KafkaWriter.validateQuery`): `value` (string or binary, required),
`key` (string or binary), `topic` (string; required unless the `topic` option is set, which
then wins), `headers` (array<struct<key:string,value:binary>>), `partition` (int; when null
or absent the record goes to Kafka's default partition: murmur2 of the key, or a sticky
partition per task for null keys). Other columns are ignored.

Each task writes with an idempotent producer of its own (a producer id per task
attempt): a batch re-sent after a leader change is not written twice. A task that fails
and is retried by Spark writes its records again under a new producer id, so the sink is
at-least-once, as Spark's Kafka sink; exactly-once needs Kafka transactions.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from kmirror.client.configs import cluster_from_configs
from kmirror.client.errors import KafkaError
from kmirror.client.idempotent_producer import IdempotentProducer
from kmirror.client.partitioner import partition_for_key
from kmirror.protocol.errors import ErrorCode
from kmirror.records.builder import SimpleRecord
from kmirror.spark.options import KafkaOptionError, SinkOptions, parse_sink_options
from kmirror.types import TopicPartition

HEADERS_TYPE = ArrayType(StructType().add("key", StringType()).add("value", BinaryType()))


@dataclass(frozen=True)
class WrittenRecords(WriterCommitMessage):
    records: int


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


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


class _TaskWriter:
    """Writes one task's rows; connections live only inside `write`."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        self._partition_counts: dict[str, int] = {}
        self._sticky: dict[str, int] = {}

    async def _partition_count(self, producer: IdempotentProducer, topic: str) -> int:
        count = self._partition_counts.get(topic)
        if count is None:
            metadata = await producer.cluster.refresh([topic])
            meta = metadata.topics.get(topic)
            if meta is None or meta.error_code or not meta.partitions:
                code = meta.error_code if meta is not None and meta.error_code else ErrorCode.unknown_topic_or_partition
                raise KafkaError(code, f"topic '{topic}' does not exist", context=f"Produce to {topic}")
            count = self._partition_counts[topic] = len(meta.partitions)
        return count

    async def write(self, batches: Iterator[pa.RecordBatch]) -> int:
        cluster = cluster_from_configs(self.options.client_configs, client_id="kmirror-spark-writer")
        producer = IdempotentProducer(cluster, compression=self.options.compression,
                                      delivery_timeout_ms=self.options.delivery_timeout_ms)
        written = 0
        pending: dict[TopicPartition, list[SimpleRecord]] = {}
        pending_bytes = 0
        try:
            for batch in batches:
                for row in _rows(batch):
                    topic = self.options.topic or row.get("topic")
                    if not topic:
                        raise KafkaOptionError("null topic present in the data. Use the 'topic' option for setting "
                                               "a default topic.")
                    count = await self._partition_count(producer, topic)
                    key = _bytes(row.get("key"))
                    partition = row.get("partition")
                    if partition is None:
                        if key is not None:
                            partition = partition_for_key(key, count)
                        else:
                            partition = self._sticky.setdefault(topic, random.randrange(count))
                    elif not 0 <= partition < count:
                        raise KafkaError(ErrorCode.unknown_topic_or_partition,
                                         f"partition {partition} does not exist (the topic has {count})",
                                         context=f"Produce to {topic}")
                    value = _bytes(row.get("value"))
                    headers = tuple((h["key"], _bytes(h["value"])) for h in (row.get("headers") or ()))
                    pending.setdefault(TopicPartition(topic, partition), []).append(
                        SimpleRecord(key, value, headers))
                    pending_bytes += len(value or b"") + len(key or b"") + 16
                    if pending_bytes >= self.options.batch_size:
                        written += sum(m.record_count for m in await producer.send(pending))
                        pending, pending_bytes = {}, 0
            if pending:
                written += sum(m.record_count for m in await producer.send(pending))
        finally:
            await cluster.close()
        return written


def _rows(batch: pa.RecordBatch) -> Iterator[Mapping[str, Any]]:
    names = [n.lower() for n in batch.schema.names]
    columns = {n: batch.column(i).to_pylist() for i, n in enumerate(names)
               if n in ("topic", "key", "value", "headers", "partition")}
    keys = list(columns)
    for values in zip(*(columns[k] for k in keys), strict=True):
        yield dict(zip(keys, values, strict=True))


def _write(options: SinkOptions, iterator: Iterator[pa.RecordBatch]) -> WrittenRecords:
    return WrittenRecords(asyncio.run(_TaskWriter(options).write(iterator)))


class KafkaWriter(DataSourceArrowWriter):
    def __init__(self, raw_options: Mapping[str, str], schema: StructType, overwrite: bool = False) -> None:
        if overwrite:
            raise KafkaOptionError("save mode Overwrite is not allowed for Kafka: use mode(\"append\")")
        self.options = parse_sink_options(raw_options)
        validate_columns(schema, self.options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenRecords:
        return _write(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Records are acknowledged by the brokers as tasks write them: nothing left to commit."""


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, raw_options: Mapping[str, str], schema: StructType) -> None:
        self.options = parse_sink_options(raw_options)
        validate_columns(schema, self.options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WrittenRecords:
        return _write(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Each micro-batch's records were acknowledged as its tasks wrote them (at-least-once)."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Acknowledged records stay written (at-least-once, as Spark's Kafka sink)."""
