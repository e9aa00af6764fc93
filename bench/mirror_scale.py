"""Mirror control plane at width: add to caught-up and failover to writable, by partition count.

Two one-node kmirror clusters (`LocalCluster`, the test helpers). For each N of `--partitions`:
a source topic of N partitions with `--records` small records each (confluent-kafka, acks=all),
a mirror on the destination, then

1. **add to caught-up**: from `kmirror mirrors --add` until `--describe` shows every partition
   MIRRORING with lag 0 and the destination log end equal to the source's;
2. **failover to writable**: from `kmirror mirrors --remove` until `--describe` shows every
   partition STOPPED and an idempotent producer has one record acknowledged on every partition,
   at offset source end + 1 (the MIRROR_PID_RESET control record took the source end offset).

Timings include the CLI's process start (one `--describe` per poll, polled every 0.25 s), as an
operator would see them. The destination node's CPU seconds (utime+stime) are given per phase.

    .venv/bin/python bench/mirror_scale.py [--partitions 100,1000] [--records 3] [--out docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer

from kmirror.testing.kafka_clients import end_offsets, produce_delivered
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, describe, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

TICKS = os.sysconf("SC_CLK_TCK")
MIRROR = "scale"
TIMEOUT_S = 600


def cpu_s(pid: int) -> float:
    """utime + stime of a process (fields 14 and 15 of /proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


@dataclass
class Row:
    partitions: int
    create_s: float
    add_s: float
    add_cpu_s: float
    failover_s: float
    failover_cpu_s: float


def fill(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for p in range(partitions):
        for i in range(records):
            producer.produce(topic, value=b"v%d-%d " % (p, i) * 20, partition=p)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise SystemExit("fill: records not delivered")


def states(bootstrap: str, topic: str) -> dict[int, tuple[int, int, int, str]]:
    return {p: row for (_, t, p), row in describe(bootstrap).items() if t == topic}


def run(n: int, records: int, base: Path) -> Row:
    source = LocalCluster(dir=base / "source", port=free_port_block())
    dest = LocalCluster(dir=base / "destination", port=free_port_block())
    topic = f"wide-{n}"
    with clusters_up(source, dest):
        t0 = time.monotonic()
        kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", topic,
                "--partitions", str(n), "--replication-factor", "1")
        create_s = time.monotonic() - t0
        fill(source.bootstrap, topic, n, records)
        ends = end_offsets(source.bootstrap, topic, n)
        create_mirror(dest, source, MIRROR, None, base / "mirror.properties")
        pid = dest.pid()

        def caught_up() -> bool:
            rows = states(dest.bootstrap, topic)
            return len(rows) == n and all(rows[p] == (ends[p], ends[p], 0, "MIRRORING") for p in range(n))

        cpu0, t0 = cpu_s(pid), time.monotonic()
        kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", MIRROR, "--topic", topic)
        wait_until(caught_up, f"{n} partitions MIRRORING with lag 0", timeout_s=TIMEOUT_S)
        add_s, add_cpu = time.monotonic() - t0, cpu_s(pid) - cpu0

        def stopped() -> bool:
            rows = states(dest.bootstrap, topic)
            return len(rows) == n and all(row[3] == "STOPPED" for row in rows.values())

        cpu0, t0 = cpu_s(pid), time.monotonic()
        kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", topic)
        wait_until(stopped, f"{n} partitions STOPPED", timeout_s=TIMEOUT_S)
        delivered = produce_delivered({"bootstrap.servers": dest.bootstrap, "enable.idempotence": True}, topic,
                                      [(p, None, b"written after failover") for p in range(n)])
        failover_s, failover_cpu = time.monotonic() - t0, cpu_s(pid) - cpu0
        if sorted(delivered) != [(p, ends[p] + 1) for p in range(n)]:
            raise SystemExit(f"failover: records not after MIRROR_PID_RESET: {sorted(delivered)[:5]}...")
    return Row(n, create_s, add_s, add_cpu, failover_s, failover_cpu)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", default="100,1000", help="comma-separated partition counts")
    ap.add_argument("--records", type=int, default=3, help="records per source partition")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rows = []
    for n in (int(x) for x in args.partitions.split(",")):
        with tempfile.TemporaryDirectory() as d:
            rows.append(run(n, args.records, Path(d)))
        print(rows[-1], flush=True)
    lines = ["| partitions | source topic create s | add to caught-up s | dest CPU-s | failover to writable s "
             "| dest CPU-s |", "|---|---|---|---|---|---|"]
    lines += [f"| {r.partitions} | {r.create_s:.1f} | {r.add_s:.1f} | {r.add_cpu_s:.1f} | {r.failover_s:.1f} "
              f"| {r.failover_cpu_s:.1f} |" for r in rows]
    table = "\n".join(lines)
    print(table)
    if args.out:
        with open(args.out, "a") as f:
            f.write(f"\n### mirror_scale, {time.strftime('%Y-%m-%d')}\n\n{table}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
