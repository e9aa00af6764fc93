"""`kmirror demo`: the end-to-end tour of what a node does today.

Starts one node as a background process (`kmirror cluster up`), creates a topic, produces
keyed records with zstd compression, consumes them back, shows the stored batches with
`dump-log` (Kafka's on-disk format, the producer's compressed bytes unchanged), restarts the
node and checks every record is still at its offset, then stops it.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from kmirror.cli.dump_log import dump_file
from kmirror.client.admin import Admin, NewTopic
from kmirror.client.consumer import EARLIEST, Consumer
from kmirror.client.producer import Producer
from kmirror.records.builder import SimpleRecord
from kmirror.records.compression import CompressionType
from kmirror.runtime.local_cluster import ClusterError, down, up
from kmirror.types import TopicPartition

TOPIC = "demo-orders"
PARTITIONS = 3


def run_demo(base: Path, port: int) -> int:
    if base.exists():
        down(base)
        shutil.rmtree(base)
    bootstrap = f"127.0.0.1:{port}"
    print(f"starting a kmirror node in {base} on {bootstrap}")
    try:
        up(base, 1, port)
    except ClusterError as exc:
        print(f"Error: {exc}")
        return 1
    try:
        produced = asyncio.run(_produce(bootstrap))
        consumed = asyncio.run(_consume(bootstrap))
        _check(produced, consumed)
        segment = base / "node-1" / "data" / f"{TOPIC}-0" / "00000000000000000000.log"
        print(f"\non disk, {segment.relative_to(base)} (Kafka's segment format):")
        for line in dump_file(str(segment), segment.read_bytes(), deep=False, print_data=False):
            print(line)
        print("\nrestarting the node: it recovers its logs from disk")
        down(base)
        up(base, 1, port)
        again = asyncio.run(_consume(bootstrap))
        _check(produced, again)
        print(f"after restart: all {len(again)} records at the same offsets")
    finally:
        down(base)
        print(f"node stopped; data left in {base}")
    return 0


async def _produce(bootstrap: str) -> dict[tuple[int, int], tuple[bytes, bytes]]:
    async with await Admin.connect(bootstrap) as admin:
        await admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
        print(f"created topic {TOPIC} with {PARTITIONS} partitions")
        producer = Producer(admin.cluster, acks=-1, compression=CompressionType.ZSTD)
        records = [SimpleRecord(f"customer-{i % 4}".encode(), f"order {i}".encode()) for i in range(12)]
        produced: dict[tuple[int, int], tuple[bytes, bytes]] = {}
        for record in records:
            (meta,) = await producer.send(TOPIC, [record])
            produced[(meta.topic_partition.partition, meta.base_offset)] = (record.key or b"", record.value or b"")
            print(f"  produced {record.key!r}: {record.value!r} -> partition {meta.topic_partition.partition} offset {meta.base_offset}")
        return produced


async def _consume(bootstrap: str) -> dict[tuple[int, int], tuple[bytes, bytes]]:
    async with await Admin.connect(bootstrap) as admin:
        consumer = Consumer(admin.cluster, max_wait_ms=100)
        await consumer.assign({TopicPartition(TOPIC, p): EARLIEST for p in range(PARTITIONS)})
        out: dict[tuple[int, int], tuple[bytes, bytes]] = {}
        for _ in range(20):
            for r in await consumer.poll():
                out[(r.topic_partition.partition, r.record.offset)] = (r.record.key or b"", r.record.value or b"")
            if len(out) >= 12:
                break
        print(f"consumed {len(out)} records from the beginning of every partition")
        return out


def _check(produced: dict[tuple[int, int], tuple[bytes, bytes]], consumed: dict[tuple[int, int], tuple[bytes, bytes]]) -> None:
    if produced != consumed:
        missing = sorted(set(produced) - set(consumed))
        raise SystemExit(f"Error: consumed records differ from produced ones (missing {missing})")
