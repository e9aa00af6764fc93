"""Share consumers (KIP-932) against a classic consumer group reading the same records in the
same run: what per-record acquisition, acknowledgement and state storage cost a node.

One node; a topic of `--partitions` partitions holds `--records` records of `--value-bytes`
bytes (lz4), written once. Cases, each a new group reading every record from the start:
(1) the baseline, one confluent-kafka Consumer (classic group, offsets committed every 5 s);
(2) one confluent-kafka ShareConsumer (implicit acknowledgement: each poll's records accepted
with the next ShareFetch, the share partition's state stored after each); (3) two
ShareConsumers of one group, in two threads. Rates are records/s over wall time until the
last record arrived; the node's CPU per record is read from /proc.

    .venv/bin/python bench/share_consume.py [--records 200000] [--partitions 4] [--value-bytes 256]
                                            [--out docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, ShareConsumer
from line_plot import report, save_bar_pair

from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.processes import LocalCluster, free_port_block
from kmirror.testing.share_consumers import earliest

TICKS = os.sysconf("SC_CLK_TCK")
PLOT = Path(__file__).resolve().parents[1] / "docs" / "share_consume.png"
TOPIC = "bench"
Row = tuple[str, int, float, float, float]  # case, records, seconds, records/s, node CPU us/record


def node_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def load(bootstrap: str, records: int, partitions: int, value_bytes: int) -> None:
    create_topic(bootstrap, TOPIC, partitions=partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "lz4", "linger.ms": 20,
                         "batch.size": 262144})
    value = os.urandom(value_bytes // 2).hex().encode()
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value=value, key=b"%d" % i, partition=i % partitions)
                break
            except BufferError:  # the client's queue is full: let it send
                producer.poll(0.1)
    assert producer.flush(120) == 0


def classic(bootstrap: str, records: int) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "classic", "auto.offset.reset": "earliest"})
    consumer.subscribe([TOPIC])
    got = 0
    try:
        while got < records:
            got += sum(1 for m in consumer.consume(10000, 1.0) if m.error() is None)
    finally:
        consumer.close()
    return got


def share(bootstrap: str, group: str, records: int, members: int) -> int:
    earliest(bootstrap, group)
    counts = [0] * members
    done = threading.Event()

    def member(i: int) -> None:
        consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        consumer.subscribe([TOPIC])
        try:
            while not done.is_set():
                counts[i] += sum(1 for m in consumer.poll(0.5) if m.error() is None)
                if sum(counts) >= records:
                    done.set()
        finally:
            consumer.close()

    threads = [threading.Thread(target=member, args=(i,)) for i in range(members)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts)


def run(records: int, partitions: int, value_bytes: int, directory: Path) -> list[Row]:
    rows: list[Row] = []
    with LocalCluster(dir=directory / "node", port=free_port_block()) as cluster:
        load(cluster.bootstrap, records, partitions, value_bytes)
        cases = [("classic consumer (baseline)", lambda: classic(cluster.bootstrap, records)),
                 ("1 share consumer", lambda: share(cluster.bootstrap, "share-1", records, 1)),
                 ("2 share consumers", lambda: share(cluster.bootstrap, "share-2", records, 2))]
        for name, case in cases:
            cpu0, t0 = node_cpu_s(cluster.pid()), time.monotonic()
            got = case()
            seconds = time.monotonic() - t0
            cpu_us = (node_cpu_s(cluster.pid()) - cpu0) * 1e6 / got
            rows.append((name, got, seconds, got / seconds, cpu_us))
            print(f"{name}: {got} records in {seconds:.1f} s, {got / seconds:,.0f}/s, node {cpu_us:.1f} CPU us/record")
    return rows


def table(rows: list[Row]) -> str:
    base_rate, base_cpu = rows[0][3], rows[0][4]
    lines = ["| case | records | seconds | records/s | vs baseline | node CPU us/record | vs baseline |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, n, seconds, rate, cpu in rows:
        lines.append(f"| {name} | {n} | {seconds:.1f} | {rate:,.0f} | {rate / base_rate:.2f}x | {cpu:.1f} | "
                     f"{cpu / base_cpu:.1f}x |")
    return "\n".join(lines)


def plot(rows: list[Row], path: Path) -> None:
    save_bar_pair(path, [r[0] for r in rows], ("records/s", [r[3] for r in rows]),
                  ("node CPU us per record", [r[4] for r in rows]),
                  "Share consumers against a classic consumer, same records, same run")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--value-bytes", type=int, default=256)
    ap.add_argument("--out", type=Path, default=None, help="append the table to this markdown file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        rows = run(args.records, args.partitions, args.value_bytes, Path(d))
    plot(rows, PLOT)
    report(table(rows), PLOT, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
