"""Moving a replica to another log dir (AlterReplicaLogDirs) against copying its segment files,
in the same run, on the same data: how fast the move is, and what it costs the requests the
node serves meanwhile.

One node with two log dirs (on the same disk here); one partition holds `--mb` MB of
incompressible records (`--value-bytes` each, no compression). Cases: (1) the baseline, the
partition's `.log` files copied to the other log dir by `shutil.copyfile` in this process and
fsync'd (removed after the timing); (2) the same copy in 4 MiB chunks, each fsync'd, as the
move flushes its future log; (3) the same partition moved there with AlterReplicaLogDirs (kafka-python), timed
from the request until DescribeLogDirs shows it in the destination and no future replica is
left. During each, a probe producer (acks=all, one record every 20 ms, another topic of the same
node) measures its produce latency; the node's CPU comes from /proc. Page cache warm: the
segments were just written, and read once before the cases.

    .venv/bin/python bench/log_dir_move.py [--mb 256] [--value-bytes 1000] [--out docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Producer
from line_plot import report, save_bar_pair

from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.processes import LocalCluster, free_port_block

TICKS = os.sysconf("SC_CLK_TCK")
PLOT = Path(__file__).resolve().parents[1] / "docs" / "log_dir_move.png"
TOPIC, PROBE_TOPIC = "moved", "probe"
Row = tuple[str, float, float, float, float, float]  # case, MB, seconds, MB/s, node CPU s, probe p99 ms


def node_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def load(bootstrap: str, mb: int, value_bytes: int) -> None:
    create_topic(bootstrap, TOPIC, partitions=1)
    create_topic(bootstrap, PROBE_TOPIC, partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                         "compression.type": "none"})
    value = os.urandom(value_bytes)
    for i in range(mb * (1 << 20) // value_bytes):
        while True:
            try:
                producer.produce(TOPIC, value=value, key=b"%d" % i)
                break
            except BufferError:
                producer.poll(0.1)
    assert producer.flush(300) == 0


class Probe(threading.Thread):
    """acks=all produce latencies of one record every 20 ms until stopped."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        self.latencies_ms: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            sent = time.monotonic()
            done = threading.Event()
            self.producer.produce(PROBE_TOPIC, value=b"p", on_delivery=lambda err, msg, done=done: done.set())
            while not done.is_set():
                self.producer.poll(0.001)
            self.latencies_ms.append((time.monotonic() - sent) * 1000)
            time.sleep(0.02)

    def p99(self) -> float:
        return statistics.quantiles(self.latencies_ms, n=100)[98] if len(self.latencies_ms) > 10 else float("nan")


def timed(cluster: LocalCluster, name: str, mb: float, case: Callable[[], None]) -> Row:
    probe = Probe(cluster.bootstrap)
    probe.start()
    time.sleep(1)
    probe.latencies_ms.clear()
    cpu0, t0 = node_cpu_s(cluster.pid()), time.monotonic()
    case()
    seconds = time.monotonic() - t0
    cpu = node_cpu_s(cluster.pid()) - cpu0
    probe.stop.set()
    probe.join()
    row = (name, mb, seconds, mb / seconds, cpu, probe.p99())
    print(f"{name}: {mb:.0f} MB in {seconds:.2f} s, {mb / seconds:.0f} MB/s, node CPU {cpu:.2f} s, "
          f"probe p99 {row[5]:.1f} ms ({len(probe.latencies_ms)} produces)")
    return row


def run(mb: int, value_bytes: int, work: Path) -> list[Row]:
    from kafka import KafkaAdminClient

    node = work / "c" / "node-1"
    first, second = node / "data", node / "data2"
    with LocalCluster(dir=work / "c", port=free_port_block(), overrides={"log.dirs": f"{first},{second}"}) as c:
        load(c.bootstrap, mb, value_bytes)
        source = next(d for d in (first, second) if (d / f"{TOPIC}-0").exists())
        destination = second if source == first else first
        segments = sorted((source / f"{TOPIC}-0").glob("*.log"))
        size_mb = sum(s.stat().st_size for s in segments) / (1 << 20)
        for s in segments:  # warm: both cases read from the page cache
            s.read_bytes()

        def copy() -> None:  # and made durable, as the move's copy is
            for s in segments:
                shutil.copyfile(s, destination / s.name)
                with open(destination / s.name, "rb+") as f:
                    os.fsync(f.fileno())

        def copy_in_steps() -> None:  # 4 MiB at a time, each fsync'd, as the move flushes
            for s in segments:
                with open(s, "rb") as src, open(destination / s.name, "wb") as dst:
                    while chunk := src.read(4 << 20):
                        dst.write(chunk)
                        dst.flush()
                        os.fsync(dst.fileno())

        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)

        def move() -> None:
            admin.alter_replica_log_dirs({(TOPIC, 0, 1): str(destination)})
            while True:
                (broker,) = admin.describe_log_dirs()
                where = [(d["log_dir"], p["is_future_key"]) for d in broker["log_dirs"] for t in d["topics"]
                         if t["name"] == TOPIC for p in t["partitions"]]
                if where == [(str(destination), False)]:
                    return
                time.sleep(0.05)

        try:
            rows = []
            for name, case in (("file copy (baseline)", copy), ("file copy, fsync per 4 MiB", copy_in_steps)):
                rows.append(timed(c, name, size_mb, case))
                for s in segments:
                    os.remove(destination / s.name)
            rows.append(timed(c, "AlterReplicaLogDirs move", size_mb, move))
            moved = sum(s.stat().st_size for s in (destination / f"{TOPIC}-0").glob("*.log")) / (1 << 20)
            assert moved == size_mb, f"the moved log holds {moved:.1f} MB of {size_mb:.1f}"
        finally:
            admin.close()
    return rows


def table(rows: list[Row]) -> str:
    base = rows[0][3]
    lines = ["| case | MB | seconds | MB/s | vs file copy | node CPU s | probe produce p99 ms |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, mb, seconds, rate, cpu, p99 in rows:
        lines.append(f"| {name} | {mb:.0f} | {seconds:.2f} | {rate:.0f} | {rate / base:.2f}x | {cpu:.2f} | {p99:.1f} |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--value-bytes", type=int, default=1000)
    ap.add_argument("--out", type=Path, default=None, help="append the table to this markdown file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        rows = run(args.mb, args.value_bytes, Path(d))
    save_bar_pair(PLOT, [r[0] for r in rows], ("MB/s", [r[3] for r in rows]),
                  ("probe produce p99 ms meanwhile", [r[5] for r in rows]),
                  "Moving a replica between log dirs against copying its files, same data, same run")
    report(table(rows), PLOT, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
