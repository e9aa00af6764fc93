"""The Spark sink (`df.write.format("kmirror")`, `writeStream`) against a plain confluent-kafka
producer writing the same rows, same run, same node.

One kmirror node (`kmirror cluster up --nodes 1`). The rows: `--mb` MB of ~1 KiB JSON
records (the generator of bench/mirror.py) with keys `0`..`999`, also saved as a Parquet
file for Spark. Each writer writes all rows to a fresh topic of PARTITIONS partitions with
`--codec`, acks=all, idempotent, keyed partitioning (murmur2):

1. confluent-kafka: one process, `Producer.produce()` per row from ready Python bytes,
   `linger.ms=20`, `batch.size=1000000`, then `flush()` (librdkafka's C producer; the
   per-row cost is one Python call).
2. kmirror sink task, one process, no Spark: the sink's task writer (`sink._TaskWriter`)
   over Arrow batches of 10,000 rows (what Spark hands a Python writer), at-least-once.
3. the same, exactly-once: one transaction (`kmirror.sink.exactlyOnce` path, marker included).
4. Spark `spark.read.parquet(rows).write.format("kmirror").save()`, local[2] (2 cores shared by
   Spark's JVM, its Python workers and the node), after a warm-up write of a few rows through
   the same sink: the first Python job of a session starts Spark's Python workers and the first
   `kmirror` write imports kmirror in each of them (planner, tasks, commit), a fixed cost of
   seconds to tens of seconds on a loaded machine that is measured apart ("cold").
5. Spark's ceiling for a Python sink: the same Parquet read written to a Python data source
   writer that only counts the Arrow batches it receives.
6. Encoding only, no broker, one process: the sink's vectorised path (partitions, records,
   compressed batches) against the per-row path it replaced (a Python dict and `SimpleRecord`
   per row, `partition_for_key` and `build_batch`): the CPU cost per row, apart from the node.
7. Spark streaming copy, `readStream.format("kmirror")` of topic 4's rows to a new topic,
   `Trigger.AvailableNow`, at-least-once and then exactly-once (read and write together), after
   an untimed first streaming query of the 2,000 rows (the session's first one is cold).

MB are uncompressed key + value bytes; rows/s and MB/s over wall time of the write; CPU per
row counts this process and its children (Spark's JVM and Python workers, client
subprocesses) and the node, the measure that other work on a shared machine distorts least.

    .venv/bin/python bench/spark_write.py [--mb 512] [--codec lz4] [--out docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from confluent_kafka import Producer
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from kmirror.client.configs import cluster_from_configs
from kmirror.client.idempotent_producer import IdempotentProducer
from kmirror.client.partitioner import partition_for_key
from kmirror.records.builder import SimpleRecord, build_batch, build_batch_from_records
from kmirror.runtime.local_cluster import down, up
from kmirror.spark.options import parse_sink_options
from kmirror.spark.sink import _TaskWriter
from kmirror.spark.sink_transactions import BatchTransaction
from kmirror.testing.kafka_clients import create_topic, end_offsets
from kmirror.testing.processes import free_port_block
from kmirror.testing.spark import spark_session

sys.path.insert(0, str(Path(__file__).parent))
from cputime import cpu_seconds, node_pids  # noqa: E402
from mirror import records  # noqa: E402  (the same 1 KiB JSON records as the mirror benchmark)

PARTITIONS = 4
ARROW_ROWS = 10_000
NODES: list[int] = []  # the node's pids: its CPU counts in every measurement
Row = tuple[str, float, float, float]  # (what, rows/s, MB/s, CPU microseconds per row)


class CountingSink(DataSource):
    """A Python sink that receives Spark's Arrow batches and drops them: Spark's own cost."""

    @classmethod
    def name(cls) -> str:
        return "bench_counting_sink"

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        return CountingWriter()


class CountingWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        sum(b.num_rows for b in iterator)
        return WriterCommitMessage()


def make_rows(total_mb: int) -> tuple[list[bytes], list[bytes], int]:
    pool = records(5000)
    keys: list[bytes] = []
    values: list[bytes] = []
    size = 0
    i = 0
    while size < total_mb * 1024 * 1024:
        keys.append(b"%d" % (i % 1000))
        values.append(pool[i % len(pool)])
        size += len(keys[-1]) + len(values[-1])
        i += 1
    return keys, values, size


def confluent(bootstrap: str, topic: str, codec: str, keys: list[bytes], values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20,
                         "batch.size": 1_000_000, "acks": "all", "enable.idempotence": True,
                         "queue.buffering.max.kbytes": 1_048_576, "partitioner": "murmur2_random"})
    for key, value in zip(keys, values, strict=True):
        while True:
            try:
                producer.produce(topic, value, key=key)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(600) == 0


def sink_task(bootstrap: str, topic: str, codec: str, table: pa.Table, exactly_once: bool) -> None:
    options = parse_sink_options({"kafka.bootstrap.servers": bootstrap, "topic": topic,
                                  "kafka.compression.type": codec})

    async def run() -> None:
        cluster = cluster_from_configs(options.client_configs, client_id="bench")
        writer = _TaskWriter(options)
        batches = iter(table.to_batches(max_chunksize=ARROW_ROWS))
        try:
            if exactly_once:
                txn = BatchTransaction("bench-", f"{topic}", 0, 0)
                await txn.run(cluster, options, lambda producer: writer.write(producer, batches),
                              lambda: writer.partitions_written, batches)
            else:
                await writer.write(IdempotentProducer(cluster, compression=options.compression), batches)
        finally:
            await cluster.close()

    asyncio.run(run())


def encode_only(table: pa.Table, codec: str, per_row: bool) -> None:
    """Rows to compressed record batches, as the sink task builds them, without sending."""
    options = parse_sink_options({"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "t",
                                  "kafka.compression.type": codec})
    for batch in table.to_batches(max_chunksize=ARROW_ROWS):
        if per_row:
            pending: dict[int, list[SimpleRecord]] = {}
            keys, values = batch.column(0).to_pylist(), batch.column(1).to_pylist()
            for row in [dict(zip(("key", "value"), kv, strict=True)) for kv in zip(keys, values, strict=True)]:
                pending.setdefault(partition_for_key(row["key"], PARTITIONS), []).append(
                    SimpleRecord(row["key"], row["value"]))
            for records in pending.values():
                build_batch(records, compression=options.compression, producer_id=1, producer_epoch=0,
                            base_sequence=0, now_ms=0)
        else:
            writer = _TaskWriter(options)
            writer._add_topic_rows("t", PARTITIONS, {"key": batch.column(0), "value": batch.column(1)})
            for sections in writer._pending.values():
                for section in sections:
                    build_batch_from_records(section.records, section.count, base_timestamp=0, max_timestamp=0,
                                             compression=options.compression, producer_id=1, producer_epoch=0,
                                             base_sequence=0)


def measured(what: str, rows: int, size: int, run: Any) -> Row:
    cpu = cpu_seconds(NODES)
    start = time.perf_counter()
    run()
    elapsed = time.perf_counter() - start
    cpu = cpu_seconds(NODES) - cpu
    result = (what, rows / elapsed, size / elapsed / 1e6, cpu / rows * 1e6)
    print(f"{what:55s} {result[1]:>10,.0f} rows/s {result[2]:>7.1f} MB/s {cpu:6.2f} CPU s ({result[3]:.2f} us/row)"
          f"  load {os.getloadavg()[0]:.1f}", flush=True)
    return result


def timed(what: str, bootstrap: str, topic: str, rows: int, size: int, run: Any) -> Row:
    create_topic(bootstrap, topic, PARTITIONS)
    result = measured(what, rows, size, run)
    written = sum(end_offsets(bootstrap, topic, PARTITIONS))
    markers = 64 if "exactly" in what else 0  # a transaction's COMMIT marker takes an offset per partition
    assert rows <= written <= rows + markers, f"{what}: {written} offsets written, expected {rows}"
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=512, help="MB of records (uncompressed key + value)")
    parser.add_argument("--codec", default="lz4")
    parser.add_argument("--out", type=Path, help="append a markdown table to this file")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kmirror-spark-write-bench-"))
    port = free_port_block()
    up(work / "node", 1, port)
    NODES.extend(node_pids(work / "node"))
    bootstrap = f"127.0.0.1:{port}"
    keys, values, size = make_rows(args.mb)
    n = len(values)
    table = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary())})
    pq.write_table(table, work / "rows.parquet", compression="none", row_group_size=32_768)  # even splits over the tasks
    codec = args.codec
    results: list[Row] = []
    try:
        results.append(timed("confluent-kafka producer, 1 process", bootstrap, "w-confluent", n, size,
                             lambda: confluent(bootstrap, "w-confluent", codec, keys, values)))
        results.append(timed("kmirror sink task, 1 process, at-least-once", bootstrap, "w-task", n, size,
                             lambda: sink_task(bootstrap, "w-task", codec, table, False)))
        results.append(timed("kmirror sink task, 1 process, exactly-once", bootstrap, "w-task-eos", n, size,
                             lambda: sink_task(bootstrap, "w-task-eos", codec, table, True)))
        results.append(measured("encoding only, vectorised (the sink's path)", n, size,
                                 lambda: encode_only(table, codec, False)))
        results.append(measured("encoding only, per row (the path it replaced)", n, size,
                                 lambda: encode_only(table, codec, True)))
        with spark_session("local[2]", **{"spark.driver.memory": "2g"}) as spark:
            spark.dataSource.register(CountingSink)
            rows_df = spark.read.parquet(str(work / "rows.parquet"))

            def spark_write(topic: str, df: Any = rows_df) -> None:
                df.write.format("kmirror").option("kafka.bootstrap.servers", bootstrap) \
                    .option("topic", topic).option("kafka.compression.type", codec).save()

            # Two tasks at once, as the timed write runs them on local[2]: both Python workers warm.
            few = rows_df.limit(2000).repartition(2)
            results.append(timed("cold: first Spark job of the session, 2,000 rows", bootstrap, "w-cold", 2000,
                                 size * 2000 // n, lambda: spark_write("w-cold", few)))
            results.append(timed("Spark df.write.format(\"kmirror\"), local[2]", bootstrap, "w-spark", n, size,
                                 lambda: spark_write("w-spark")))
            results.append(measured("Spark to a Python sink that drops the rows (ceiling)", n, size,
                                    lambda: rows_df.write.format("bench_counting_sink").mode("append").save()))

            # The session's first streaming query is cold (Spark's streaming classes, the source's
            # planning): without this one untimed, whichever query came first took 3x the CPU.
            stream_cold = "w-stream-cold"
            create_topic(bootstrap, stream_cold, PARTITIONS)

            def stream(out: str, exactly_once: bool, source: str = "w-spark") -> None:
                query = spark.readStream.format("kmirror").option("kafka.bootstrap.servers", bootstrap) \
                    .option("subscribe", source).option("startingOffsets", "earliest").load() \
                    .selectExpr("key", "value").writeStream.format("kmirror") \
                    .option("kafka.bootstrap.servers", bootstrap).option("topic", out) \
                    .option("kafka.compression.type", codec) \
                    .option("kmirror.sink.exactlyOnce", str(exactly_once).lower()) \
                    .option("checkpointLocation", str(work / f"checkpoint-{out}")) \
                    .trigger(availableNow=True).start()
                query.awaitTermination()

            stream(stream_cold, False, source="w-cold")
            for exactly_once in (False, True):
                out = f"w-stream-{'eos' if exactly_once else 'alo'}"
                what = f"Spark readStream -> writeStream, {'exactly' if exactly_once else 'at-least'}-once"
                try:
                    results.append(timed(what, bootstrap, out, n, size,
                                         lambda out=out, exactly_once=exactly_once: stream(out, exactly_once)))
                except Exception as exc:  # e.g. Spark's Python worker timing out on an overloaded machine
                    print(f"{what}: failed: {str(exc).splitlines()[0]}", flush=True)
    finally:
        down(work / "node")
        shutil.rmtree(work, ignore_errors=True)
    if args.out:
        lines = [f"\n### Run of {time.strftime('%Y-%m-%d')}, {args.mb} MB ({n:,} rows of ~1 KiB), {codec}, "
                 f"{PARTITIONS} partitions\n",
                 "| writer | rows/s | MB/s | vs confluent-kafka | CPU us/row |", "|---|---:|---:|---:|---:|"]
        for what, rate, mb, us in results:
            lines.append(f"| {what} | {rate:,.0f} | {mb:.0f} | {rate / results[0][1]:.2f}x | {us:.2f} |")
        with args.out.open("a") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
