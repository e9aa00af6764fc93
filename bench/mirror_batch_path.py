"""The per-batch path of a mirror, in one process: CPU time of each side, not wall time.

A source `ReplicaManager` and a destination `ReplicaManager` (each with a topic of
`--partitions` partitions led by the node, logs on disk or `--fs memory`), the node's
request handlers (`build_registry`) and the mirror's own fetch machinery: `FetchEngine` with
the mirror policy, `MirrorLocalReplica`, `SourceClusterEndPoint` in a fetch session. Only the
socket is left out: the endpoint's connection hands each request's bytes to the source's
decode -> handler -> encode, and the answer's bytes back to the client's decoder.

Each round: `--batches-per-round` Produce requests of one one-record batch each (round robin,
as librdkafka sends them), then one mirror Fetch round (plan, session request, the source's
answer, appends). CPU seconds (`time.process_time`) are summed apart for the source's
Produce handling, the source's handling of the mirror's requests (Fetch, and the Metadata
requests a source without topic ids in Fetch costs) and everything else (the destination):
divided by the batches, the per-batch costs of `bench/mirror_perbatch.py` without its
processes, sockets and other load, so they hold on a busy machine. Few batches per round
show the per-round cost (the session's walk over every partition).

Another tree's code: `PYTHONPATH=OTHER/src .venv/bin/python bench/mirror_batch_path.py`.

    .venv/bin/python bench/mirror_batch_path.py [--partitions 2000] [--batches-per-round 300]
        [--rounds 40] [--fs disk|memory] [--record-bytes 200]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import inspect
import tempfile
import time
import uuid
from types import SimpleNamespace
from typing import Any

from kio.index import load_request_schema

from kmirror.broker.api import RequestContext, build_registry
from kmirror.broker.services import BrokerServices
from kmirror.client.protocol import (
    _decode_body,
    choose_version,
    encode_request,
    request_schema,
    response_schema,
)
from kmirror.log.config import LogConfig
from kmirror.log.log_manager import LogManager
from kmirror.mirror.fetcher.local_replica import MirrorLocalReplica
from kmirror.mirror.fetcher.policy import mirror_fetch_policy
from kmirror.mirror.fetcher.source_endpoint import SourceClusterEndPoint
from kmirror.ports import ManualClock
from kmirror.protocol.codec import decode_request, encode_response
from kmirror.protocol.entities import build, nested
from kmirror.records.builder import build_batch
from kmirror.replication.fetcher.engine import FetchEngine
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.runtime.os_fs import OsFileSystem
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.testing.replication import server_config, single_node_image
from kmirror.types import TopicPartition

TOPIC_ID = uuid.uuid4()
REGISTRY = build_registry()


class Node:
    """A node's replica manager and handlers, serving request bytes, CPU time kept per API."""

    def __init__(self, directory: str, partitions: int, memory: bool, clock: ManualClock) -> None:
        fs = MemoryFileSystem() if memory else OsFileSystem()
        if memory:
            fs.mkdirs(directory)
        logs = LogManager(fs, [directory], clock, LogConfig())
        logs.load_logs()
        self.rm = ReplicaManager(1, logs, clock, server_config(1, log_dirs=directory))
        image = single_node_image(1, {"t": (TOPIC_ID, partitions)})
        self.rm.apply_image(None, image)
        self.services = BrokerServices(node_id=1, config=self.rm.config, registry=REGISTRY, clock=clock,
                                       metadata=SimpleNamespace(image=image, controller_id=1, forwarding=False),
                                       replica_manager=self.rm)
        self.cpu_s: dict[int, float] = {}

    async def serve(self, raw: bytes) -> bytes:
        t0 = time.process_time()
        decoded = decode_request(REGISTRY, raw)
        header = decoded.header  # type: ignore[union-attr]
        spec = decoded.spec  # type: ignore[union-attr]
        ctx = RequestContext(header, spec.response_type(header.api_version), "127.0.0.1", 1)
        result = spec.handler(self.services, ctx, decoded.body)  # type: ignore[union-attr]
        if inspect.isawaitable(result):
            result = await result
        payload = encode_response(spec, header.api_version, header.correlation_id, result)
        self.cpu_s[header.api_key] = self.cpu_s.get(header.api_key, 0.0) + time.process_time() - t0
        return bytes(payload[4:])


class InProcessConnection:
    """What the endpoint needs of a `BrokerConnection`, answered by `node` without a socket.
    The source advertises Fetch up to v18 (no KIP-1279), as a Kafka 3.x-4.x source does."""

    connected = True

    def __init__(self, node: Node) -> None:
        self.node = node
        self.api_versions = {k: (REGISTRY.get(k).min_version, REGISTRY.get(k).max_version)  # type: ignore[union-attr]
                             for k in (0, 2, 3, 23)}
        self.api_versions[1] = (4, 18)
        self._correlation_id = 0

    def request_type(self, api_key: int) -> type[Any]:
        return request_schema(api_key, choose_version(api_key, self.api_versions))  # type: ignore[arg-type]

    def build_request(self, api_key: int, **fields: Any) -> Any:
        return build(self.request_type(api_key), **fields)

    async def send(self, request: Any, *, expect_response: bool = True, timeout_ms: int | None = None) -> Any:
        self._correlation_id += 1
        frame = await self.node.serve(encode_request(request, self._correlation_id, "mirror"))
        api_key, version = int(type(request).__api_key__), int(type(request).__version__)
        return _decode_body(frame, api_key, response_schema(api_key, version))

    async def close(self) -> None:
        pass


async def run(args: argparse.Namespace, source_dir: str, destination_dir: str) -> dict[str, float]:
    clock = ManualClock()
    n = args.partitions
    source = Node(source_dir, n, args.fs == "memory", clock)
    destination = Node(destination_dir, n, args.fs == "memory", clock)
    endpoint = SourceClusterEndPoint("source", 9092, client_id="mirror")
    endpoint._conn = InProcessConnection(source)  # type: ignore[assignment]  # the socket left out
    local = MirrorLocalReplica(destination.rm)
    engine = FetchEngine(local, mirror_fetch_policy(None))
    for p in range(n):
        tp = TopicPartition("t", p)
        local.admit(tp)
        engine.add_partition(tp, TOPIC_ID, -1)
    produce_type = load_request_schema(0, 9)
    topic_data, partition_data = nested(produce_type, "TopicProduceData"), nested(produce_type, "PartitionProduceData")
    value = b"x" * args.record_bytes

    async def produce(partition: int) -> None:
        batch = build_batch([(None, value, (), 1_700_000_000_000)])
        request = build(produce_type, transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=30),
                        topic_data=(topic_data(name="t", partition_data=(partition_data(index=partition, records=batch),)),))
        await source.serve(encode_request(request, 1, "producer"))

    async def mirror_round() -> None:
        queries = engine.epoch_queries(clock.monotonic_ms())
        if queries:
            engine.handle_epoch_end_offsets(await endpoint.fetch_epoch_end_offsets(queries), clock.monotonic_ms())
        plan = engine.fetch_plan(clock.monotonic_ms())
        if plan is not None:
            engine.handle_fetch_response(plan, await endpoint.fetch(plan), clock.monotonic_ms())

    for p in range(n):  # one record everywhere, copied, and the session open: the steady state
        await produce(p)
    for _ in range(3):
        await mirror_round()
    gc.freeze()  # as a node does after creating its logs (runtime/metadata_publisher.py)
    source.cpu_s.clear()

    def mirror_serving() -> float:
        return sum(cpu for api_key, cpu in source.cpu_s.items() if api_key != 0)

    batches = 0
    destination_cpu_s = 0.0
    for _ in range(args.rounds):
        for _ in range(args.batches_per_round):
            await produce(batches % n)
            batches += 1
        clock.advance(10)
        serving = mirror_serving()
        t0 = time.process_time()
        await mirror_round()
        destination_cpu_s += time.process_time() - t0 - (mirror_serving() - serving)
    copied = sum(destination.rm.get_partition(TopicPartition("t", p)).log.log_end_offset for p in range(n))  # type: ignore[union-attr]
    if copied != n + batches:
        raise SystemExit(f"{copied - n} of {batches} batches copied")
    return {"produce_us": source.cpu_s.get(0, 0.0) / batches * 1e6, "fetch_us": mirror_serving() / batches * 1e6,
            "destination_us": destination_cpu_s / batches * 1e6}


def in_process_options(partitions: int, record_bytes: int) -> argparse.ArgumentParser:
    """The options every in-process bench on `Node` takes; the caller adds its own."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=partitions)
    ap.add_argument("--fs", choices=("disk", "memory"), default="disk")
    ap.add_argument("--record-bytes", type=int, default=record_bytes)
    ap.add_argument("--label", default="run", help="the name the result line starts with")
    return ap


def main() -> int:
    ap = in_process_options(partitions=2000, record_bytes=200)
    ap.add_argument("--batches-per-round", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as source_dir, tempfile.TemporaryDirectory() as destination_dir:
        out = asyncio.run(run(args, source_dir, destination_dir))
    print(f"{args.label}: {args.partitions} partitions, {args.batches_per_round} batches per round, {args.fs}: "
          f"source Produce {out['produce_us']:.1f} us/batch, source serving the mirror {out['fetch_us']:.1f} us/batch, "
          f"destination {out['destination_us']:.1f} us/batch (CPU)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
