"""`kmirror verify` throughput against a single-process byte comparison, same run, same logs.

Two single-node clusters (`kmirror cluster up`), A -> B mirrored (KIP-1279). A topic of
PARTITIONS partitions is filled on A with ~1 KiB JSON records (the generator of
bench/mirror.py) by a confluent-kafka producer (`--codec`, default lz4), `--mb` MB of
records (default 1024), and B catches up. Then, on the same two logs:

1. baseline: one process fetches both logs partition after partition with kmirror's raw
   partition fetcher and compares each pair of Fetch answers' record bytes (`==`): the
   cheapest complete comparison of the two logs over the network.
2. kmirror verify's comparison, one process, no Spark (`verify_partition` per partition, one
   after the other): batch headers, CRCs and bytes, a Fetch kept in flight on each side.
3. kmirror verify on Spark local[2]: plan + one task per partition (`run_verification`),
   after one warm-up run (Python workers start), the time `kmirror verify` spends on its job.

MB/s are of log bytes compared (the destination's batches, as stored: compressed), over
wall time.

    .venv/bin/python bench/verify.py [--mb 1024] [--codec lz4] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer

from kmirror.client.cluster import Cluster
from kmirror.client.raw_fetch import PartitionFetcher
from kmirror.client.read_committed import next_fetch_offset
from kmirror.runtime.local_cluster import down, up
from kmirror.spark.verify import plan_verification, run_verification, verify_partition
from kmirror.testing.kafka_clients import create_topic, end_offsets
from kmirror.testing.processes import free_port_block, kmirror
from kmirror.testing.spark import spark_session
from kmirror.types import TopicPartition

sys.path.insert(0, str(Path(__file__).parent))
from mirror import records  # noqa: E402  (the same 1 KiB JSON records as the mirror benchmark)

PARTITIONS = 4
TOPIC = "verify-bench"


def fill(bootstrap: str, codec: str, total_mb: int) -> None:
    pool = records(4096)
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20,
                         "batch.size": 1_000_000, "acks": "all", "queue.buffering.max.kbytes": 262144})
    n = total_mb * 1024 * 1024 // 1024
    for i in range(n):
        while True:
            try:
                producer.produce(TOPIC, pool[i % len(pool)], key=b"%d" % (i % 1000), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(300) == 0


def byte_comparison(a: str, b: str, ends: list[int]) -> int:
    """The baseline: both logs fetched, each pair of answers compared as bytes. Bytes compared."""
    async def run() -> int:
        total = 0
        async with Cluster(a) as ca, Cluster(b) as cb:
            for p in range(PARTITIONS):
                tp = TopicPartition(TOPIC, p)
                fa, fb = PartitionFetcher(ca, tp), PartitionFetcher(cb, tp)
                offset = 0
                while offset < ends[p]:
                    ra, rb = await asyncio.gather(fa.fetch(offset), fb.fetch(offset))
                    whole = next_fetch_offset(rb.records, offset)
                    assert ra.records == rb.records, f"{tp} differs near offset {offset}"
                    total += len(rb.records)
                    offset = whole
        return total

    return asyncio.run(run())


def timed(runs: int, fn: Callable[[], int]) -> tuple[float, int]:
    """Median seconds over `runs`, and the bytes the last run compared."""
    seconds, size = [], 0
    for _ in range(runs):
        start = time.perf_counter()
        size = fn()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=1024)
    parser.add_argument("--codec", default="lz4")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kmirror-verify-bench-"))
    pa, pb = free_port_block(), free_port_block()
    a, b = f"127.0.0.1:{pa}", f"127.0.0.1:{pb}"
    up(work / "a", 1, pa)
    up(work / "b", 1, pb)
    try:
        create_topic(a, TOPIC, PARTITIONS)
        print(f"filling {args.mb} MB of records ({args.codec}) on A ...", flush=True)
        fill(a, args.codec, args.mb)
        kmirror("features", "--bootstrap-server", b, "upgrade", "--feature", "mirror.version=1")
        (work / "m.properties").write_text(f"bootstrap.servers={a}\n")
        kmirror("mirrors", "--bootstrap-server", b, "--create", "--mirror", "m", "--mirror-config",
                str(work / "m.properties"))
        kmirror("mirrors", "--bootstrap-server", b, "--add", "--mirror", "m", "--topic", TOPIC)
        ends = end_offsets(a, TOPIC, PARTITIONS)
        while end_offsets(b, TOPIC, PARTITIONS) != ends:
            time.sleep(0.5)
        print("B caught up; measuring", flush=True)
        src, dst = {"bootstrap.servers": a}, {"bootstrap.servers": b}
        plans = asyncio.run(plan_verification(src, dst, topic_pattern=TOPIC))

        def one_process() -> int:
            results = [verify_partition(p, src, dst) for p in plans]
            assert all(r.divergence is None and r.error is None for r in results)
            return sum(r.bytes_compared for r in results)

        rows = [("baseline: one process, Fetch answers compared as bytes", *timed(args.runs,
                 lambda: byte_comparison(a, b, ends)))]
        rows.append(("kmirror verify's comparison, one process, no Spark", *timed(args.runs, one_process)))
        with spark_session("local[2]") as spark:
            def on_spark() -> int:
                results = run_verification(spark, asyncio.run(plan_verification(src, dst, topic_pattern=TOPIC)),
                                           src, dst)
                assert all(r.divergence is None and r.error is None for r in results)
                return sum(r.bytes_compared for r in results)

            on_spark()  # warm-up: Python workers start
            rows.append(("kmirror verify on Spark local[2] (plan + job)", *timed(args.runs, on_spark)))
        base = rows[0][2] / rows[0][1]
        print(f"\n{args.mb} MB of records, {args.codec}, {PARTITIONS} partitions; log bytes compared per run: "
              f"{rows[-1][2] / 1e6:,.0f} MB; median of {args.runs} runs\n")
        print("| run | seconds | log MB/s | vs baseline |")
        print("|---|---:|---:|---:|")
        for name, seconds, size in rows:
            rate = size / seconds
            print(f"| {name} | {seconds:.2f} | {rate / 1e6:,.0f} | {rate / base:.2f}x |")
    finally:
        down(work / "a")
        down(work / "b")
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
