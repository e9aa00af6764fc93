"""CPU per mirrored batch: one-record batches spread round robin over a wide mirrored topic.

Two one-node kmirror clusters (`LocalCluster`, as `bench/mirror_scale.py`): a source topic of
`--partitions` N partitions holding one record each, a mirror of it on the destination, every
partition MIRRORING and copied. Then

1. **idle** (`--idle-s`): nothing is produced; the CPU seconds (utime+stime from
   /proc/PID/stat) of the destination and the source node, the baseline the load adds to;
2. **load** (`--seconds` S at `--rate` R records/s): a confluent-kafka producer writes
   `--record-bytes` records round robin over the N partitions. At R/N records per partition
   per second each record is its own batch (the producer's `linger.ms` is 5); the batches
   are counted exactly afterwards from the destination's log segments. Each record carries
   its send time; a consumer of `--lag-partitions` of the destination partitions (spread
   evenly, from their end) takes each arrival: the **mirror lag** (send to arrival at a
   destination consumer: the source's produce path, the mirror, the destination's fetch);
3. **drain**: after the producer stops, the end offsets of both clusters (one ListOffsets
   of all N partitions per cluster every 0.5 s) until the destination has every record.

Reported: CPU us per mirrored batch of each node over the load and drain, the same net of
the idle rate, records/s achieved, lag p50 / p99 / max of the sampled partitions, the drain
time. `--profile DIR` records both nodes with py-spy during the load (raw, idle frames
included: `DIR/destination.txt`, `DIR/source.txt`); profiled runs are not for the numbers.

To compare two commits on the same machine, run the bench of one and the other in turn;
the nodes are `python -m kmirror` processes, so `PYTHONPATH=OTHER/src` runs another tree's
brokers with this bench.

    .venv/bin/python bench/mirror_perbatch.py [--partitions 2000] [--rate 2000] [--seconds 20]
        [--record-bytes 200] [--lag-partitions 100] [--idle-s 5] [--profile DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

from kmirror.client.admin import LATEST_TIMESTAMP, Admin
from kmirror.records.batch import iter_batches
from kmirror.testing.hostile import percentile
from kmirror.testing.metrics_scrape import mirror_fetch_requests, request_count
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, describe, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.types import TopicPartition as TP

sys.path.insert(0, str(Path(__file__).parent))
from mirror_scale import cpu_s  # noqa: E402  (the same /proc reading as the scale benchmark)

MIRROR = "perbatch"
TIMEOUT_S = 600


def log_batches(cluster: LocalCluster, topic: str) -> int:
    """Record batches in every segment of the topic's partitions on the cluster's node."""
    total = 0
    for segment in (cluster.dir / "node-1" / "data").glob(f"{topic}-*/*.log"):
        total += sum(1 for _ in iter_batches(segment.read_bytes(), allow_truncated_tail=True))
    return total


def end_offset_sum(bootstrap: str, topic: str, n: int) -> int:
    async def ask() -> int:
        async with await Admin.connect(bootstrap) as admin:
            listed = await admin.list_offsets({TP(topic, p): LATEST_TIMESTAMP for p in range(n)})
            return sum(o.offset for o in listed.values())

    return asyncio.run(ask())


def mirroring(bootstrap: str, topic: str, n: int) -> bool:
    try:
        rows = [row for (_, t, _), row in describe(bootstrap).items() if t == topic]
    except AssertionError:  # a busy node did not answer in time: ask again
        return False
    return len(rows) == n and all(row[3] == "MIRRORING" for row in rows)


def lag_consumer(bootstrap: str, topic: str, partitions: list[int]) -> Consumer:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "perbatch-lag", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 50, "auto.offset.reset": "latest"})
    consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in partitions])
    for _ in range(20):  # let it resolve its end offsets before the first record
        consumer.poll(0.1)
    return consumer


def produce(bootstrap: str, topic: str, n: int, rate: float, seconds: float, record_bytes: int,
            sent: list[int], flush_s: float = 300) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                         "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 2_000_000})
    padding = b"x" * max(0, record_bytes - 8)
    per_tick = rate / 100  # records per 10 ms
    start = time.monotonic()
    owed = 0.0
    while (now := time.monotonic()) - start < seconds:
        owed += per_tick
        while owed >= 1:
            producer.produce(topic, value=struct.pack(">d", time.time()) + padding, partition=sent[0] % n)
            sent[0] += 1
            owed -= 1
        producer.poll(0)
        time.sleep(max(0.0, 0.01 - (time.monotonic() - now)))
    if producer.flush(flush_s) != 0:
        raise SystemExit("producer: records not delivered")


def requests(source_metrics: int, dest_metrics: int) -> dict[str, float]:
    """Produce and consumer Fetch requests the source served, Fetch requests the mirror sent."""
    return {"source_produce_requests": request_count(source_metrics, "Produce"),
            "source_fetch_requests": request_count(source_metrics, "FetchConsumer"),
            "mirror_fetch_requests": sum(mirror_fetch_requests(dest_metrics, MIRROR).values())}


def py_spy(pid: int, out: Path, seconds: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid), "--idle", "--nonblocking", "-f", "raw", "-r", "100",
                             "-d", str(int(seconds)), "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run(args: argparse.Namespace, base: Path) -> dict[str, float]:
    n = args.partitions
    source_metrics, dest_metrics = free_port_block(), free_port_block()
    source = LocalCluster(dir=base / "source", port=free_port_block(), overrides={"metrics.port": str(source_metrics)})
    dest = LocalCluster(dir=base / "destination", port=free_port_block(), overrides={"metrics.port": str(dest_metrics)})
    topic = f"perbatch-{n}"
    with clusters_up(source, dest):
        kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", topic,
                "--partitions", str(n), "--replication-factor", "1")
        # One record per partition first: the first batch of a partition writes its epoch
        # checkpoint on both sides, a one-off the steady state does not pay.
        # (A node creates a wide topic's logs off its event loop after CreateTopics answers:
        # the first records wait for them.)
        produce(source.bootstrap, topic, n, rate=max(1000.0, n), seconds=n / max(1000.0, n), record_bytes=16,
                sent=[0], flush_s=TIMEOUT_S)
        create_mirror(dest, source, MIRROR, topic, base / "mirror.properties")
        wait_until(lambda: mirroring(dest.bootstrap, topic, n), f"{n} partitions MIRRORING", timeout_s=TIMEOUT_S)
        target = end_offset_sum(source.bootstrap, topic, n)
        wait_until(lambda: end_offset_sum(dest.bootstrap, topic, n) >= target, "the first records mirrored",
                   timeout_s=TIMEOUT_S)
        src_pid, dst_pid = source.pid(), dest.pid()

        time.sleep(2)  # the add's last passes settle
        d0, s0, t0 = cpu_s(dst_pid), cpu_s(src_pid), time.monotonic()
        time.sleep(args.idle_s)
        idle_s = time.monotonic() - t0
        idle_dest, idle_source = (cpu_s(dst_pid) - d0) / idle_s, (cpu_s(src_pid) - s0) / idle_s

        batches0, source_batches0 = log_batches(dest, topic), log_batches(source, topic)
        step = max(1, n // max(1, args.lag_partitions))
        consumer = lag_consumer(dest.bootstrap, topic, list(range(0, n, step))[:args.lag_partitions])
        sent = [0]
        producer = threading.Thread(target=produce, daemon=True, args=(
            source.bootstrap, topic, n, args.rate, args.seconds, args.record_bytes, sent))
        spies = []
        if args.profile:
            args.profile.mkdir(parents=True, exist_ok=True)
            spies = [py_spy(dst_pid, args.profile / "destination.txt", args.seconds),
                     py_spy(src_pid, args.profile / "source.txt", args.seconds)]
        requests0 = requests(source_metrics, dest_metrics)
        d0, s0, t0 = cpu_s(dst_pid), cpu_s(src_pid), time.monotonic()
        producer.start()
        lags: list[float] = []
        while producer.is_alive():
            for m in consumer.consume(num_messages=10_000, timeout=0.05):
                if m.error() is None and len(m.value()) >= 8:
                    lags.append(time.time() - struct.unpack(">d", m.value()[:8])[0])
        stopped = time.monotonic()
        load_s = stopped - t0
        d_load, s_load = cpu_s(dst_pid) - d0, cpu_s(src_pid) - s0
        target = end_offset_sum(source.bootstrap, topic, n)
        while end_offset_sum(dest.bootstrap, topic, n) < target:
            if time.monotonic() - stopped > TIMEOUT_S:
                raise SystemExit("the destination did not catch up")
            for m in consumer.consume(num_messages=10_000, timeout=0.5):
                if m.error() is None and len(m.value()) >= 8:
                    lags.append(time.time() - struct.unpack(">d", m.value()[:8])[0])
        drained = time.monotonic()
        d_all, s_all = cpu_s(dst_pid) - d0, cpu_s(src_pid) - s0
        counts = {k: v - requests0[k] for k, v in requests(source_metrics, dest_metrics).items()}
        for m in consumer.consume(num_messages=10_000, timeout=0.5):  # the last sampled arrivals
            if m.error() is None and len(m.value()) >= 8:
                lags.append(time.time() - struct.unpack(">d", m.value()[:8])[0])
        consumer.close()
        for spy in spies:
            spy.wait(timeout=120)
        batches = log_batches(dest, topic) - batches0
        source_batches = log_batches(source, topic) - source_batches0
    window = drained - t0
    return {
        "partitions": n, "rate": args.rate, "seconds": args.seconds, "record_bytes": args.record_bytes,
        "produced": sent[0], "produced_per_s": sent[0] / load_s, "mirrored_batches": batches,
        "source_batches": source_batches, "load_s": load_s, "drain_s": drained - stopped,
        "dest_cpu_s": d_all, "source_cpu_s": s_all, "dest_cpu_load_s": d_load, "source_cpu_load_s": s_load,
        "idle_dest_cpu_per_s": idle_dest, "idle_source_cpu_per_s": idle_source,
        "dest_us_per_batch": d_all / batches * 1e6, "source_us_per_batch": s_all / batches * 1e6,
        "dest_net_us_per_batch": (d_all - idle_dest * window) / batches * 1e6,
        "source_net_us_per_batch": (s_all - idle_source * window) / batches * 1e6,
        "lag_samples": len(lags), "lag_p50_s": percentile(lags, 0.5), "lag_p99_s": percentile(lags, 0.99),
        "lag_max_s": max(lags, default=float("nan")), "load_average": os.getloadavg()[0], **counts,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=2000, help="records (= batches) per second, round robin")
    ap.add_argument("--seconds", type=float, default=20, help="seconds of load")
    ap.add_argument("--record-bytes", type=int, default=200)
    ap.add_argument("--lag-partitions", type=int, default=100, help="destination partitions the lag consumer reads")
    ap.add_argument("--idle-s", type=float, default=5)
    ap.add_argument("--profile", type=Path, default=None, help="py-spy both nodes during the load into this directory")
    ap.add_argument("--label", default="", help="a name for this run in the output (e.g. the commit)")
    ap.add_argument("--json", type=Path, default=None, help="append the result as a JSON line")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        row = {"label": args.label, **run(args, Path(d))}
    print(f"{args.label or 'run'}: {row['partitions']} partitions, {row['produced_per_s']:.0f} batches/s "
          f"({row['mirrored_batches']} mirrored of {row['source_batches']}): destination "
          f"{row['dest_us_per_batch']:.0f} us/batch ({row['dest_net_us_per_batch']:.0f} net of idle), source "
          f"{row['source_us_per_batch']:.0f} us/batch ({row['source_net_us_per_batch']:.0f} net); lag p50 "
          f"{row['lag_p50_s']:.2f} s, p99 {row['lag_p99_s']:.2f} s, max {row['lag_max_s']:.2f} s; drain "
          f"{row['drain_s']:.1f} s; {row['mirror_fetch_requests']:.0f} mirror Fetches, "
          f"{row['source_produce_requests']:.0f} Produce; load average {row['load_average']:.1f}", flush=True)
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
