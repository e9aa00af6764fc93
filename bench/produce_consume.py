"""Produce and consume throughput (MB/s) of a kmirror node, next to a raw baseline measured in the same run.

Baselines, measured in the same run: a minimal asyncio server that receives size-prefixed
frames, appends each to a file and answers 8 bytes (write); and one that answers each 8-byte
request with the next chunk of a file read with os.pread (read). Their clients keep 8 requests in
flight. That is the floor cost of moving bytes through Python sockets and files on this machine;
kmirror adds the Kafka protocol, validation, indexes and the client library on top.

    .venv/bin/python bench/produce_consume.py [--seconds 6] [--out docs/benchmarks.md]

Cases (acks=1, confluent-kafka clients, uncompressed):
  small: 1 KiB records in 16 KiB batches;  large: 1 KiB records in 1 MiB batches.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from kmirror.runtime.local_cluster import down, up  # noqa: E402

RECORD = os.urandom(1024)


# ---------------------------------------------------------------- baseline
async def _baseline_server(path: Path, ready: asyncio.Future[int]) -> asyncio.Server:
    f = open(path, "ab")

    class P(asyncio.Protocol):
        def connection_made(self, transport):
            self.t = transport
            self.buf = bytearray()

        def data_received(self, data):
            self.buf += data
            while len(self.buf) >= 4:
                (n,) = struct.unpack_from(">i", self.buf)
                if len(self.buf) < 4 + n:
                    break
                f.write(memoryview(self.buf)[4 : 4 + n])
                del self.buf[: 4 + n]
                self.t.write(b"\x00" * 8)

    server = await asyncio.get_running_loop().create_server(P, "127.0.0.1", 0)
    ready.set_result(server.sockets[0].getsockname()[1])
    return server


async def _baseline_produce(batch_bytes: int, seconds: float, in_flight: int = 8) -> float:
    with tempfile.TemporaryDirectory() as d:
        ready: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        server = await _baseline_server(Path(d) / "seg.log", ready)
        reader, writer = await asyncio.open_connection("127.0.0.1", await ready)
        payload = struct.pack(">i", batch_bytes) + os.urandom(batch_bytes)
        sent = 0
        start = time.perf_counter()
        pending = 0
        while time.perf_counter() - start < seconds:
            while pending < in_flight:
                writer.write(payload)
                pending += 1
            await reader.readexactly(8)
            pending -= 1
            sent += batch_bytes
        while pending:
            await reader.readexactly(8)
            pending -= 1
            sent += batch_bytes
        elapsed = time.perf_counter() - start
        writer.close()
        server.close()
        return sent / elapsed / 1e6


async def _baseline_consume(batch_bytes: int, seconds: float, in_flight: int = 8) -> float:
    """The read side: each 8-byte request is answered with the next `batch_bytes` of a file
    (os.pread), size-prefixed, as a fetch of stored batches would be."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "seg.log"
        path.write_bytes(os.urandom(batch_bytes) * 64)
        fd = os.open(path, os.O_RDONLY)
        size = path.stat().st_size

        class P(asyncio.Protocol):
            pos = 0

            def connection_made(self, transport):
                self.t = transport

            def data_received(self, data):
                for _ in range(len(data) // 8):
                    chunk = os.pread(fd, batch_bytes, self.pos)
                    self.pos = (self.pos + batch_bytes) % size
                    self.t.write(struct.pack(">i", len(chunk)) + chunk)

        server = await asyncio.get_running_loop().create_server(P, "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
        received = 0
        start = time.perf_counter()
        writer.write(b"\x00" * 8 * in_flight)
        while time.perf_counter() - start < seconds:
            (n,) = struct.unpack(">i", await reader.readexactly(4))
            await reader.readexactly(n)
            received += n
            writer.write(b"\x00" * 8)
        elapsed = time.perf_counter() - start
        writer.close()
        server.close()
        os.close(fd)
        return received / elapsed / 1e6


# ---------------------------------------------------------------- kmirror
def kmirror_produce(
    bootstrap: str, topic: str, batch_bytes: int, seconds: float, acks: int | str = 1
) -> tuple[float, int]:
    """confluent-kafka producing 1 KiB records to partition 0 for `seconds`: (MB/s, records)."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": acks,
            "batch.size": batch_bytes,
            "linger.ms": 5 if batch_bytes <= 65536 else 50,
            "message.max.bytes": max(1_000_000, batch_bytes + 65536),
            "queue.buffering.max.kbytes": 1_048_576,
            "enable.idempotence": False,
        }
    )
    n = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(1000):
            try:
                producer.produce(topic, RECORD, partition=0)
                n += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - start
    return n * len(RECORD) / elapsed / 1e6, n


def _kmirror_consume(bootstrap: str, topic: str, count: int) -> float:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52428800,
            "max.partition.fetch.bytes": 10485760,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    start = time.perf_counter()
    while got < count:
        msgs = consumer.consume(10000, 5)
        if not msgs and time.perf_counter() - start > 120:
            break
        got += len(msgs)
    elapsed = time.perf_counter() - start
    consumer.close()
    return got * len(RECORD) / elapsed / 1e6


def _kcat_consume(bootstrap: str, topic: str, total_bytes: int) -> float | None:
    """kcat (librdkafka in C) reading the partition to its end: the broker is the limit, not
    the Python client building one object per record."""
    if shutil.which("kcat") is None:
        return None
    start = time.perf_counter()
    subprocess.run(
        ["kcat", "-b", bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
         "-X", "fetch.max.bytes=52428800", "-X", "max.partition.fetch.bytes=10485760", "-f", "%o\\n"],
        stdout=subprocess.DEVNULL, check=True, timeout=600,
    )
    return total_bytes / (time.perf_counter() - start) / 1e6


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--port", type=int, default=29092)
    ap.add_argument("--out", type=Path, default=None, help="append a results table to this markdown file")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        base = Path(d)
        up(base, 1, args.port, {"message.max.bytes": str(4 * 1024 * 1024)})
        bootstrap = f"127.0.0.1:{args.port}"
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for name in ("small", "large"):
                admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
            for name, batch in (("small", 16 * 1024), ("large", 1024 * 1024)):
                base_prod = asyncio.run(_baseline_produce(batch, args.seconds))
                prod_mb, n = kmirror_produce(bootstrap, name, batch, args.seconds)
                base_cons = asyncio.run(_baseline_consume(batch, args.seconds))
                cons_mb = _kmirror_consume(bootstrap, name, n)
                kcat_mb = _kcat_consume(bootstrap, name, n * len(RECORD))
                rows.append((name, batch, base_prod, prod_mb, base_cons, cons_mb, kcat_mb))
        finally:
            down(base)
    lines = [
        "| case | batch | write baseline | produce | ratio | read baseline | consume (python) | ratio "
        "| consume (kcat) | ratio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, batch, base_prod, prod_mb, base_cons, cons_mb, kcat_mb in rows:
        kcat = f"{kcat_mb:.0f} | {kcat_mb / base_cons:.0%}" if kcat_mb else "n/a | n/a"
        lines.append(
            f"| {name} | {batch // 1024} KiB | {base_prod:.0f} | {prod_mb:.0f} | {prod_mb / base_prod:.0%} "
            f"| {base_cons:.0f} | {cons_mb:.0f} | {cons_mb / base_cons:.0%} | {kcat} |"
        )
    table = "\n".join(lines)
    print(table)
    if args.out:
        with open(args.out, "a") as f:
            f.write(f"\n### produce/consume, {time.strftime('%Y-%m-%d')}\n\n{table}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
