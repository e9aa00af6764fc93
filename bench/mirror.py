"""Cluster Mirroring throughput against a MirrorMaker-style copy, same clusters, same data, same run.

Two single-node kmirror clusters (source and destination, `kmirror cluster up --nodes 1` each).
For each codec (zstd, lz4) a 3-partition source topic is filled with ~1 KiB JSON-like records
by a confluent-kafka producer with that codec. Then, per codec:

1. kmirror: `kmirror mirrors --add` the topic to a mirror on the destination; timed from the add
   until every destination partition's log end offset equals the source's. The mirror fetcher
   appends the source batches unchanged (no decompression, same offsets).
2. MirrorMaker way: a confluent-kafka consumer on the source and an acks=all producer with the
   same codec to a plain topic on the destination (decompress, recompress, new offsets); timed
   until every record is acknowledged.

CPU seconds: the destination node process's utime+stime from /proc/<pid>/stat over each interval;
for the MirrorMaker way plus the copier's own CPU (time.process_time: librdkafka's threads
included). MB are source log bytes (the compressed batches as stored). The source node's CPU is
shown for information and counted in neither ratio.

    .venv/bin/python bench/mirror.py [--mb 400] [--out docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror.cli.main import main as kmirror_main
from kmirror.runtime.local_cluster import down, pid_path, up
from kmirror.testing.processes import free_port_block

CODECS = ("zstd", "lz4")
PARTITIONS = 3
RECORD_BYTES = 1024
TICKS = os.sysconf("SC_CLK_TCK")
WORDS = ("checkout", "cart", "search", "view", "login", "logout", "click", "scroll", "payment",
         "shipping", "refund", "review", "wishlist", "coupon", "banner", "recommendation")
AGENTS = ("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/124.0 Safari/537.36",
          "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 Version/17.4 Safari/605.1.15",
          "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) Mobile/15E148")


def records(n: int, seed: int = 7) -> list[bytes]:
    """`n` distinct JSON lines of RECORD_BYTES: clickstream-like events, compressible like real logs."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        event = {
            "ts": 1_760_000_000_000 + i * 37,
            "event": rng.choice(WORDS),
            "user_id": f"u-{rng.randrange(10**6):06d}",
            "session": f"{rng.getrandbits(128):032x}",
            "url": f"/{rng.choice(WORDS)}/{rng.randrange(10**5)}?ref={rng.choice(WORDS)}",
            "agent": rng.choice(AGENTS),
            "geo": {"country": rng.choice(("DE", "FR", "US", "BR", "JP", "IN")), "lat": round(rng.uniform(-90, 90), 4),
                    "lon": round(rng.uniform(-180, 180), 4)},
            "items": [{"sku": f"SKU-{rng.randrange(10**6):06d}", "qty": rng.randrange(1, 5),
                       "price": round(rng.uniform(1, 500), 2)} for _ in range(rng.randrange(1, 5))],
        }
        line = json.dumps(event, separators=(",", ":"))
        pad = " ".join(rng.choice(WORDS) for _ in range(RECORD_BYTES // 6))
        line = line[:-1] + ',"note":"' + pad
        out.append((line[: RECORD_BYTES - 2] + '"}').encode())
    return out


def cpu_s(pid: int) -> float:
    """utime + stime of a process (fields 14 and 15 of /proc/<pid>/stat, after the comm field)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def log_bytes(data_dir: Path, topic: str) -> int:
    return sum(p.stat().st_size for p in data_dir.glob(f"{topic}-*/*.log"))


def end_offsets(consumer: Consumer, topic: str) -> list[int]:
    return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in range(PARTITIONS)]


def kmirror(*args: str) -> None:
    if kmirror_main(list(args)) != 0:
        raise SystemExit(f"kmirror {' '.join(args)} failed")


def fill(bootstrap: str, topic: str, codec: str, total_mb: int, pool: list[bytes]) -> int:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 10,
                         "acks": "all", "queue.buffering.max.kbytes": 262144})
    n = total_mb * 1024 * 1024 // RECORD_BYTES
    for i in range(n):
        while True:
            try:
                producer.produce(topic, pool[i % len(pool)], key=b"%d" % (i % 1000), partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 10000 == 0:
            producer.poll(0)
    if producer.flush(120) != 0:
        raise SystemExit("fill: records not delivered")
    return n


@dataclass
class Run:
    seconds: float
    dest_cpu_s: float
    copier_cpu_s: float
    source_cpu_s: float

    def cpu(self) -> float:
        return self.dest_cpu_s + self.copier_cpu_s


def mirror_copy(source: str, dest: str, topic: str, source_ends: list[int], dest_pid: int, source_pid: int) -> Run:
    probe = Consumer({"bootstrap.servers": dest, "group.id": "bench-probe"})
    try:
        cpu0, src0, t0 = cpu_s(dest_pid), cpu_s(source_pid), time.monotonic()
        kmirror("mirrors", "--bootstrap-server", dest, "--add", "--mirror", "bench", "--topic", topic)
        while True:
            try:
                if end_offsets(probe, topic) == source_ends:
                    break
            except Exception:  # the mirror topic is still being created
                pass
            time.sleep(0.05)
        t1 = time.monotonic()
        return Run(t1 - t0, cpu_s(dest_pid) - cpu0, 0.0, cpu_s(source_pid) - src0)
    finally:
        probe.close()


def mirrormaker_copy(source: str, dest: str, topic: str, target: str, codec: str, total: int, dest_pid: int,
                     source_pid: int) -> Run:
    consumer = Consumer({"bootstrap.servers": source, "group.id": f"mm-{codec}", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "fetch.max.bytes": 52428800})
    producer = Producer({"bootstrap.servers": dest, "compression.type": codec, "linger.ms": 10, "acks": "all",
                         "queue.buffering.max.kbytes": 262144})
    acked = 0

    def on_delivery(err: KafkaError | None, _msg: object) -> None:
        nonlocal acked
        if err is not None:
            raise SystemExit(f"MirrorMaker copy: {err}")
        acked += 1

    cpu0, src0, own0, t0 = cpu_s(dest_pid), cpu_s(source_pid), time.process_time(), time.monotonic()
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    copied = 0
    while copied < total:
        for msg in consumer.consume(10000, timeout=1.0):
            if msg.error():
                continue
            while True:
                try:
                    producer.produce(target, msg.value(), key=msg.key(), partition=msg.partition(),
                                     headers=msg.headers(), on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
            copied += 1
        producer.poll(0)
    producer.flush(120)
    t1 = time.monotonic()
    run = Run(t1 - t0, cpu_s(dest_pid) - cpu0, time.process_time() - own0, cpu_s(source_pid) - src0)
    consumer.close()
    if acked != total:
        raise SystemExit(f"MirrorMaker copy: {acked} of {total} records acknowledged")
    return run


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=400, help="MB of records (uncompressed) per codec")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    pool = records(4096)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        base = Path(d)
        src_dir, dst_dir = base / "source", base / "destination"
        src_port, dst_port = free_port_block(), 0
        up(src_dir, 1, src_port)
        try:
            dst_port = free_port_block()
            up(dst_dir, 1, dst_port)
            source, dest = f"127.0.0.1:{src_port}", f"127.0.0.1:{dst_port}"
            source_pid = int(pid_path(src_dir, 1).read_text())
            dest_pid = int(pid_path(dst_dir, 1).read_text())
            src_admin, dst_admin = AdminClient({"bootstrap.servers": source}), AdminClient({"bootstrap.servers": dest})
            for f in src_admin.create_topics([NewTopic(f"events-{c}", PARTITIONS, 1) for c in CODECS]).values():
                f.result(30)
            for f in dst_admin.create_topics([NewTopic(f"mm-events-{c}", PARTITIONS, 1) for c in CODECS]).values():
                f.result(30)
            totals = {c: fill(source, f"events-{c}", c, args.mb, pool) for c in CODECS}
            probe = Consumer({"bootstrap.servers": source, "group.id": "bench-probe"})
            ends = {c: end_offsets(probe, f"events-{c}") for c in CODECS}
            probe.close()
            config = base / "mirror.properties"
            config.write_text(f"bootstrap.servers={source}\n")
            kmirror("features", "--bootstrap-server", dest, "upgrade", "--feature", "mirror.version=1")
            kmirror("mirrors", "--bootstrap-server", dest, "--create", "--mirror", "bench", "--mirror-config",
                    str(config))
            for c in CODECS:
                topic = f"events-{c}"
                mb = log_bytes(src_dir / "node-1" / "data", topic) / 1e6
                km = mirror_copy(source, dest, topic, ends[c], dest_pid, source_pid)
                mm = mirrormaker_copy(source, dest, topic, f"mm-{topic}", c, totals[c], dest_pid, source_pid)
                mm_mb = log_bytes(dst_dir / "node-1" / "data", f"mm-{topic}") / 1e6
                rows.append((c, totals[c], mb, mm_mb, km, mm))
        finally:
            if dst_port:
                down(dst_dir)
            down(src_dir)
    lines = [
        "| codec | records | source log MB | copy | s | MB/s | dest node CPU-s | copier CPU-s | MB/CPU-s "
        "| source node CPU-s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c, n, mb, _mm_mb, km, mm in rows:
        for name, r in (("kmirror mirror", km), ("MirrorMaker way", mm)):
            lines.append(f"| {c} | {n} | {mb:.0f} | {name} | {r.seconds:.1f} | {mb / r.seconds:.0f} "
                         f"| {r.dest_cpu_s:.1f} | {r.copier_cpu_s:.1f} | {mb / r.cpu():.0f} | {r.source_cpu_s:.1f} |")
    ratios = [f"{c}: {(mb / km.cpu()) / (mb / mm.cpu()):.1f}x per CPU-second, {mm.seconds / km.seconds:.1f}x MB/s "
              f"(MirrorMaker way wrote {mm_mb:.0f} MB at the destination)" for c, _, mb, mm_mb, km, mm in rows]
    table = "\n".join(lines) + "\n\nkmirror ÷ MirrorMaker way: " + "; ".join(ratios)
    print(table)
    if args.out:
        with open(args.out, "a") as f:
            f.write(f"\n### mirror, {time.strftime('%Y-%m-%d')}\n\n{table}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
