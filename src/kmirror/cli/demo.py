"""`kmirror demo`: the end-to-end tour of what kmirror does today.

Starts one node as a background process (`kmirror cluster up`), creates a topic, produces
keyed records with zstd compression, consumes them back, shows the stored batches with
`dump-log` (Kafka's on-disk format, the producer's compressed bytes unchanged), restarts the
node and checks every record is still at its offset. Then it starts a second cluster and
mirrors the topic into it (KIP-1279) with `kmirror features` / `kmirror mirrors`, compares the
two clusters' segment files batch by batch, shows that the mirror topic refuses Produce, fails
over, produces at the destination, and fails back: the old source mirrors the destination
under the same mirror name, copies only the delta and ends byte-identical.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kmirror.cli.dump_log import dump_file
from kmirror.client.admin import Admin, NewTopic
from kmirror.client.consumer import EARLIEST, Consumer
from kmirror.client.errors import KafkaError
from kmirror.client.producer import Producer
from kmirror.records.batch import iter_batches
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
        _mirror_tour(base, bootstrap, port + 1)
    finally:
        down(base / "mirror-destination")
        down(base)
        print(f"nodes stopped; data left in {base}")
    return 0


def _mirror_tour(base: Path, source: str, dest_port: int) -> None:
    dest_dir = base / "mirror-destination"
    dest = f"127.0.0.1:{dest_port}"
    print(f"\nCluster Mirroring: a destination cluster on {dest} mirrors {TOPIC} from {source}")
    up(dest_dir, 1, dest_port)
    _start_mirror(base / "mirror.properties", dest, source)
    _wait_for_mirror(dest, lambda rows: all(r.lag == 0 and r.state == "MIRRORING" for r in rows))
    _kmirror(["mirrors", "--bootstrap-server", dest, "--describe"])
    _compare(base, dest_dir)
    try:
        asyncio.run(_produce_one(dest))
        raise SystemExit("Error: the mirror topic accepted a Produce")
    except KafkaError as exc:
        print(f"producing to the mirror topic at the destination is refused: {exc.error_name}")
    print("\nfailover: the destination stops mirroring and becomes writable")
    _kmirror(["mirrors", "--bootstrap-server", dest, "--remove", "--topic", ".*"])
    _wait_for_mirror(dest, lambda rows: all(r.state == "STOPPED" for r in rows))
    meta = asyncio.run(_produce_one(dest))
    print(f"after failover the destination is writable: produced at partition "
          f"{meta.topic_partition.partition} offset {meta.base_offset}")
    before = {p: len(_batches(base / "node-1" / "data" / f"{TOPIC}-{p}")) for p in range(PARTITIONS)}
    print("\nfailback: the old source mirrors the new one under the same mirror name")
    _start_mirror(base / "failback.properties", source, dest)
    _wait_for_mirror(source, lambda rows: all(r.lag == 0 and r.state == "MIRRORING" for r in rows))
    _kmirror(["mirrors", "--bootstrap-server", source, "--describe"])
    for p in range(PARTITIONS):
        copied = len(_batches(base / "node-1" / "data" / f"{TOPIC}-{p}")) - before[p]
        print(f"  partition {p}: {copied} new batch(es): the MIRROR_PID_RESET marker and what was written after failover")
    _compare(base, dest_dir)


def _start_mirror(config: Path, dest: str, source: str) -> None:
    config.write_text(f"bootstrap.servers={source}\n")
    for args in (
        ["features", "--bootstrap-server", dest, "upgrade", "--feature", "mirror.version=1"],
        ["mirrors", "--bootstrap-server", dest, "--create", "--mirror", "demo", "--mirror-config", str(config)],
        ["mirrors", "--bootstrap-server", dest, "--add", "--mirror", "demo", "--topic", TOPIC],
    ):
        _kmirror(args)


def _compare(base: Path, dest_dir: Path) -> None:
    for p in range(PARTITIONS):
        src = _batches(base / "node-1" / "data" / f"{TOPIC}-{p}")
        dst = _batches(dest_dir / "node-1" / "data" / f"{TOPIC}-{p}")
        if src != dst:
            raise SystemExit(f"Error: partition {p} differs between the two clusters")
        print(f"  partition {p}: {len(src)} batches byte-identical at the same offsets in both clusters")


def _kmirror(args: list[str]) -> None:
    # Imported here: cli.main imports the command modules, this one among them.
    from kmirror.cli.main import main

    command = shlex.join(["kmirror", *args])
    print(f"$ {command}")
    if main(args) != 0:
        raise SystemExit(f"Error: {command} failed")


def _batches(partition_dir: Path) -> list[tuple[int, bytes]]:
    data = (partition_dir / "00000000000000000000.log").read_bytes()
    return [(h.base_offset, data[pos : pos + h.size]) for pos, h in iter_batches(data)]


def _wait_for_mirror(cluster: str, done: Callable[[list[Any]], bool], timeout_s: float = 60) -> list[Any]:
    async def describe() -> list[Any]:
        async with await Admin.connect(cluster) as admin:
            return list(await admin.describe_mirrors(["demo"]))

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rows = asyncio.run(describe())
        if rows and done(rows):
            return rows
        time.sleep(0.5)
    raise SystemExit("Error: the mirror did not reach the expected state in time")


async def _produce_one(bootstrap: str) -> Any:
    async with await Admin.connect(bootstrap) as admin:
        producer = Producer(admin.cluster, acks=-1)
        (meta,) = await producer.send(TOPIC, [SimpleRecord(b"customer-0", b"order after failover")], partition=0)
        return meta


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
            print(f"  produced {_text(record.key)}: {_text(record.value)} -> partition {meta.topic_partition.partition} offset {meta.base_offset}")
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


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode("utf-8", errors="backslashreplace")


def _check(produced: dict[tuple[int, int], tuple[bytes, bytes]], consumed: dict[tuple[int, int], tuple[bytes, bytes]]) -> None:
    if produced != consumed:
        missing = sorted(set(produced) - set(consumed))
        raise SystemExit(f"Error: consumed records differ from produced ones (missing {missing})")
