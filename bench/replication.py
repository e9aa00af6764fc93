"""Replication cost: acks=all to an RF=3 topic (min.insync.replicas=2) against acks=1 to an
RF=1 topic, on the same 3-broker cluster in the same run (1 KiB records, confluent-kafka).

    .venv/bin/python bench/replication.py [--seconds 6] [--out docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic
from produce_consume import kmirror_produce

from kmirror.runtime.local_cluster import down, up


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--port", type=int, default=29192)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        base = Path(d)
        up(base, 3, args.port, {"message.max.bytes": str(4 * 1024 * 1024)})
        bootstrap = ",".join(f"127.0.0.1:{args.port + i}" for i in range(3))
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            topics = [NewTopic("rf1", 1, 1), NewTopic("rf3", 1, 3, config={"min.insync.replicas": "2"})]
            for f in admin.create_topics(topics).values():
                f.result(30)
            time.sleep(2)  # followers join the ISR
            for batch in (16 * 1024, 1024 * 1024):
                rf1, _ = kmirror_produce(bootstrap, "rf1", batch, args.seconds, acks=1)
                rf3, _ = kmirror_produce(bootstrap, "rf3", batch, args.seconds, acks="all")
                rows.append((batch, rf1, rf3))
        finally:
            down(base)
    lines = ["| batch | acks=1 RF=1 MB/s | acks=all RF=3 MB/s | ratio |", "|---|---|---|---|"]
    lines += [f"| {b // 1024} KiB | {r1:.0f} | {r3:.0f} | {r3 / r1:.0%} |" for b, r1, r3 in rows]
    table = "\n".join(lines)
    print(table)
    if args.out:
        with open(args.out, "a") as f:
            f.write(f"\n### replication, {time.strftime('%Y-%m-%d')}\n\n{table}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
