"""Spark reads through `format("kmirror")` against a single-process confluent-kafka baseline
and kmirror's raw fetch rate, same run, same topic.

One kmirror node (`kmirror cluster up --nodes 1`). Per codec (zstd, lz4) a topic of
PARTITIONS partitions is filled with ~1 KiB JSON records (the generator of bench/mirror.py)
by a confluent-kafka producer with that codec, `--mb` MB of records (default 2048). Then,
on that topic:

1. raw fetch: kmirror's client (`PartitionFetcher`) fetching every batch of every partition
   in one process, one partition after the other, counting records from the batch headers
   (no decompression, no decoding): the ceiling the node and the client give a reader.
2. confluent-kafka: one consumer process (librdkafka, `consume(10000)`) building a
   `pyarrow.Table` (key, value, topic, partition, offset, timestamp) of every record.
3. kmirror reader, one process: `kmirror.spark.task_reader.read_range` per partition, the
   Arrow batches a Spark task yields, without Spark.
4. Spark `spark.read.format("kmirror")...load().count()`, local[2] (2 cores: Spark's tasks,
   its JVM and the node share them).
5. Spark, the same read written to Parquet (`df.write.parquet`, snappy).
6. Spark's own ceiling: `count()` over a Python data source yielding ready-made Arrow
   batches of the same schema and size (no fetching, no decoding).

MB are uncompressed record bytes (key + value); rows/s and MB/s are over wall time. CPU
per row counts this process and its children (Spark's JVM and Python workers) and the node,
so it holds on a machine that other work shares.

    .venv/bin/python bench/spark_read.py [--mb 2048] [--codecs zstd,lz4] [--out docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kmirror.client.cluster import Cluster
from kmirror.client.raw_fetch import PartitionFetcher
from kmirror.client.read_committed import next_fetch_offset
from kmirror.records.batch import iter_batches
from kmirror.runtime.local_cluster import down, up
from kmirror.spark.arrow_records import SCHEMA, TIMESTAMP_TYPE
from kmirror.spark.planning import OffsetRange
from kmirror.spark.source import kafka_schema
from kmirror.spark.task_reader import ReadSettings, read_range
from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.processes import free_port_block
from kmirror.testing.spark import spark_session
from kmirror.types import TopicPartition as KTopicPartition

sys.path.insert(0, str(Path(__file__).parent))
from cputime import cpu_seconds, node_pids  # noqa: E402
from mirror import records  # noqa: E402  (the same 1 KiB JSON records as the mirror benchmark)

PARTITIONS = 4
RECORD_BYTES = 1024


def fill(bootstrap: str, topic: str, codec: str, total_mb: int, pool: list[bytes]) -> tuple[int, int]:
    """(records, uncompressed key+value bytes) produced."""
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20,
                         "batch.size": 1_000_000, "acks": "all", "queue.buffering.max.kbytes": 262144})
    n = total_mb * 1024 * 1024 // RECORD_BYTES
    size = 0
    for i in range(n):
        key = b"%d" % (i % 1000)
        value = pool[i % len(pool)]
        size += len(key) + len(value)
        while True:
            try:
                producer.produce(topic, value, key=key, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10000 == 0:
            producer.poll(0)
    if producer.flush(300) != 0:
        raise SystemExit("fill: records not delivered")
    return n, size


def end_offsets(bootstrap: str, topic: str) -> list[int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-probe"})
    ends = [c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(PARTITIONS)]
    c.close()
    return ends


WIRE_BYTES: dict[str, int] = {}  # per topic: the records bytes the raw fetch received


def raw_fetch(bootstrap: str, topic: str, ends: list[int]) -> int:
    async def run() -> int:
        count = 0
        WIRE_BYTES[topic] = 0
        async with Cluster(bootstrap) as cluster:
            for p in range(PARTITIONS):
                fetcher = PartitionFetcher(cluster, KTopicPartition(topic, p))
                offset = 0
                while offset < ends[p]:
                    fetched = await fetcher.fetch(offset)
                    WIRE_BYTES[topic] += len(fetched.records)
                    count += sum(h.records_count for _, h in iter_batches(fetched.records, allow_truncated_tail=True)
                                 if h.base_offset >= offset)
                    offset = next_fetch_offset(fetched.records, offset)
        return count

    return asyncio.run(run())


def confluent_table(bootstrap: str, topic: str, total: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "fetch.max.bytes": 64 * 1024 * 1024,
                         "max.partition.fetch.bytes": 8 * 1024 * 1024, "queued.max.messages.kbytes": 262144})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    tables = []
    got = 0
    while got < total:
        keys, values, partitions, offsets, timestamps = [], [], [], [], []
        for msg in consumer.consume(10000, timeout=1.0):
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise SystemExit(f"consumer: {msg.error()}")
            keys.append(msg.key())
            values.append(msg.value())
            partitions.append(msg.partition())
            offsets.append(msg.offset())
            timestamps.append(msg.timestamp()[1] * 1000)
        if not values:
            continue
        got += len(values)
        tables.append(pa.table({
            "key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary()),
            "topic": pa.repeat(pa.scalar(topic), len(values)), "partition": pa.array(partitions, pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
            "timestamp": pa.array(timestamps, pa.int64()).cast(pa.timestamp("us", tz="UTC"))}))
    consumer.close()
    return pa.concat_tables(tables).num_rows


def kmirror_reader(bootstrap: str, topic: str, ends: list[int]) -> int:
    settings = ReadSettings({"bootstrap.servers": bootstrap}, False, False, True, 120_000)
    return sum(rb.num_rows for p in range(PARTITIONS)
               for rb in read_range(settings, OffsetRange(topic, p, 0, ends[p])))


class ReadyArrowReader(DataSourceReader):
    """Yields ready-made RecordBatches in the Kafka schema (1 KiB values): what Spark itself
    costs to take Arrow batches from Python workers, with no fetching or decoding."""

    def __init__(self, rows: int) -> None:
        self.rows = rows

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(PARTITIONS)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        n = 4096
        rb = pa.RecordBatch.from_arrays([
            pa.array([b"%d" % (i % 1000) for i in range(n)], pa.binary()), pa.array([b"x" * RECORD_BYTES] * n, pa.binary()),
            pa.repeat(pa.scalar("t"), n), pa.array(np.zeros(n, np.int32)), pa.array(np.arange(n, dtype=np.int64)),
            pa.array(np.zeros(n, np.int64)).cast(TIMESTAMP_TYPE), pa.array(np.zeros(n, np.int32))], schema=SCHEMA)
        share = self.rows // PARTITIONS + (1 if partition.value < self.rows % PARTITIONS else 0)
        for start in range(0, share, n):
            yield rb.slice(0, min(n, share - start))


class ReadyArrow(DataSource):
    @classmethod
    def name(cls) -> str:
        return "ready-arrow"

    def schema(self) -> StructType:
        return kafka_schema(False)

    def reader(self, schema: StructType) -> DataSourceReader:
        return ReadyArrowReader(int(self.options["rows"]))


NODES: list[int] = []  # the node's pids: its CPU counts in every measurement


Row = tuple[str, float, float, float]  # (what, rows/s, MB/s, CPU microseconds per row)


def timed(what: str, fn: Callable[[], int], expected: int, size: int) -> Row:
    """Wall-clock rates, and the CPU per row of this process tree (Spark's JVM and Python
    workers included) and the node: the machine is shared, so CPU per row is the measure
    that other work does not distort; 2 cores / CPU per row bounds the rate on an idle one."""
    cpu = cpu_seconds(NODES)
    start = time.perf_counter()
    n = fn()
    seconds = time.perf_counter() - start
    cpu = cpu_seconds(NODES) - cpu
    if n != expected:
        raise SystemExit(f"{what}: {n} records, expected {expected}")
    rate, mb, us = n / seconds, size / seconds / 1e6, cpu / n * 1e6
    print(f"  {what:<34} {seconds:7.2f} s  {rate:>10,.0f} rows/s  {mb:7.1f} MB/s  {cpu:6.2f} CPU s "
          f"({us:.2f} us/row)", flush=True)
    return what, rate, mb, us


def run_codec(spark: Any, bootstrap: str, codec: str, mb: int, pool: list[bytes], work: Path) -> list[Row]:
    topic = f"bench-{codec}"
    create_topic(bootstrap, topic, PARTITIONS)
    t = time.perf_counter()
    total, size = fill(bootstrap, topic, codec, mb, pool)
    print(f"{codec}: {total:,} records, {size / 1e6:,.0f} MB produced in {time.perf_counter() - t:.0f} s", flush=True)
    ends = end_offsets(bootstrap, topic)
    assert sum(ends) == total
    df = spark.read.format("kmirror").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic).load()
    # Warm-up: Spark's Python workers start and import kmirror once, as in any long job.
    spark.read.format("kmirror").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic) \
        .option("endingOffsets", json.dumps({topic: {str(p): min(1000, e) for p, e in enumerate(ends)}})) \
        .load().count()
    out = work / f"parquet-{codec}"

    def to_parquet() -> int:
        df.write.parquet(str(out))
        return int(spark.read.parquet(str(out)).count())

    rows = [
        timed("raw fetch (kmirror client)", lambda: raw_fetch(bootstrap, topic, ends), total, size),
        timed("confluent-kafka -> pyarrow.Table", lambda: confluent_table(bootstrap, topic, total), total, size),
        timed("kmirror reader, one process", lambda: kmirror_reader(bootstrap, topic, ends), total, size),
        timed("Spark read .count()", lambda: int(df.count()), total, size),
        timed("Spark read -> Parquet", to_parquet, total, size),
        timed("Spark ceiling: ready-made Arrow", lambda: int(spark.read.format("ready-arrow").option("rows", total)
                                                             .load().count()), total, size),
    ]
    shutil.rmtree(out, ignore_errors=True)
    print(f"  (the raw fetch received {WIRE_BYTES[topic] / 1e6:,.0f} MB of {codec} batches)", flush=True)
    base, raw = rows[1][1], rows[0][1]
    print(f"  Spark count: {rows[3][1] / base:.2f}x confluent-kafka, {rows[3][1] / raw:.0%} of raw fetch; "
          f"Parquet: {rows[4][1] / base:.2f}x confluent-kafka; CPU per row: Spark count {rows[3][3]:.2f} us, "
          f"confluent-kafka {rows[1][3]:.2f} us, raw fetch {rows[0][3]:.2f} us", flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=2048, help="MB of records per codec (uncompressed)")
    parser.add_argument("--codecs", default="zstd,lz4")
    parser.add_argument("--out", type=Path, help="append a markdown table to this file")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kmirror-spark-bench-"))
    port = free_port_block()
    up(work / "node", 1, port)
    NODES.extend(node_pids(work / "node"))
    bootstrap = f"127.0.0.1:{port}"
    pool = records(5000)
    results: dict[str, list[Row]] = {}
    try:
        with spark_session("local[2]", **{"spark.driver.memory": "2g"}) as spark:
            spark.dataSource.register(ReadyArrow)
            for codec in args.codecs.split(","):
                results[codec] = run_codec(spark, bootstrap, codec, args.mb, pool, work)
    finally:
        down(work / "node")
        shutil.rmtree(work, ignore_errors=True)
    if args.out:
        lines = [f"\n### Run of {time.strftime('%Y-%m-%d')}, {args.mb} MB per codec, {PARTITIONS} partitions\n",
                 "| codec | reader | rows/s | MB/s | vs confluent-kafka | vs raw fetch | CPU us/row |",
                 "|---|---|---:|---:|---:|---:|---:|"]
        for codec, rows in results.items():
            for what, rate, mb, us in rows:
                lines.append(f"| {codec} | {what} | {rate:,.0f} | {mb:.0f} | {rate / rows[1][1]:.2f}x | "
                             f"{rate / rows[0][1]:.0%} | {us:.2f} |")
        with args.out.open("a") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
