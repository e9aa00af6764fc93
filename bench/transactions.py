"""Transactional produce throughput against idempotent produce, measured in the same run.

One kmirror node (`kmirror cluster up`), one partition, 1 KiB records, confluent-kafka. The
baseline is an idempotent, non-transactional producer (acks=all, the same batching); the case
is a transactional producer committing a transaction every 100 ms (begin, produce for 100 ms,
commit, repeat). Both runs produce for the same wall time; the result is MB/s of record bytes
acknowledged (transactional: committed) and their ratio.

    .venv/bin/python bench/transactions.py [--seconds 10] [--rounds 3] [--out docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror.runtime.local_cluster import down, up
from kmirror.testing.processes import free_port_block

RECORD = os.urandom(1024)
TRANSACTION_MS = 100
COMMON = {"linger.ms": 5, "batch.size": 262144, "acks": "all", "queue.buffering.max.kbytes": 65536}


def create_topic(bootstrap: str) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(timeout=30)
    return name


def produce_for(producer: Producer, topic: str, seconds: float) -> int:
    """Records handed to the producer during `seconds` (it blocks when its queue is full)."""
    sent = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            producer.produce(topic, value=RECORD, partition=0)
            sent += 1
        except BufferError:
            producer.poll(0.005)
        if sent % 1000 == 0:
            producer.poll(0)
    return sent


def idempotent(bootstrap: str, seconds: float) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **COMMON})
    topic = create_topic(bootstrap)
    start = time.monotonic()
    sent = produce_for(producer, topic, seconds)
    assert producer.flush(60) == 0
    return sent * len(RECORD) / (time.monotonic() - start) / 1e6


def transactional(bootstrap: str, seconds: float) -> tuple[float, int]:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{uuid.uuid4()}", **COMMON})
    producer.init_transactions(60)
    topic = create_topic(bootstrap)
    sent = transactions = 0
    start = time.monotonic()
    deadline = start + seconds
    while time.monotonic() < deadline:
        producer.begin_transaction()
        sent += produce_for(producer, topic, TRANSACTION_MS / 1000)
        producer.commit_transaction(60)
        transactions += 1
    return sent * len(RECORD) / (time.monotonic() - start) / 1e6, transactions


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None, help="append a results table to this markdown file")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="kmirror-bench-txn-"))
    port = free_port_block()
    up(base, 1, port)
    try:
        bootstrap = f"127.0.0.1:{port}"
        idem, txn, counts = [], [], []
        for _ in range(args.rounds):  # interleaved, so both see the same machine load
            idem.append(idempotent(bootstrap, args.seconds))
            mbps, count = transactional(bootstrap, args.seconds)
            txn.append(mbps)
            counts.append(count)
    finally:
        down(base)
    i, t = statistics.median(idem), statistics.median(txn)
    table = (f"| case | MB/s (median of {args.rounds}) | ratio |\n|---|---|---|\n"
             f"| idempotent, acks=all | {i:.1f} | 100% |\n"
             f"| transactional, {TRANSACTION_MS} ms transactions | {t:.1f} | {100 * t / i:.0f}% |\n")
    print(table)
    print(f"runs: idempotent {[round(x, 1) for x in idem]}, transactional {[round(x, 1) for x in txn]}, "
          f"transactions per run {counts}")
    if args.out is not None:
        with args.out.open("a") as f:
            f.write(f"\nRun of {time.strftime('%Y-%m-%d')}:\n\n{table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
