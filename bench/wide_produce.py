"""A producer's Produce request over many partitions, in one process: node CPU per batch.

A librdkafka producer writing round robin over a wide topic sends, every `linger.ms`, one
Produce request per broker carrying one small batch for each partition it wrote to meanwhile
(10,000 records/s over 10,000 partitions at linger.ms=50: ~500 partitions of one batch per
request). This bench times that request through the node (decode -> handler -> encode,
`bench/mirror_batch_path.Node`, no socket): `--per-request` partitions of one batch of one
`--record-bytes` record each, acks=1, logs on disk by default. CPU time per batch; holds on a
busy machine.

Another tree's code: `PYTHONPATH=OTHER/src .venv/bin/python bench/wide_produce.py`.

    .venv/bin/python bench/wide_produce.py [--partitions 10000] [--per-request 500] [--requests 40]
        [--fs disk|memory] [--idempotent]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import statistics
import tempfile
import time
from typing import Any

from mirror_batch_path import Node, in_process_options

from kmirror.client.protocol import encode_request, request_schema
from kmirror.ports import ManualClock
from kmirror.protocol.entities import build, nested
from kmirror.records.builder import build_batch


def produce_request(version: int, batches: dict[int, bytes]) -> Any:
    schema = request_schema(0, version)
    topic_data, partition_data = nested(schema, "TopicProduceData"), nested(schema, "PartitionProduceData")
    return build(schema, transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=30),
                 topic_data=(topic_data(name="t", partition_data=tuple(
                     partition_data(index=p, records=batch) for p, batch in batches.items())),))


async def run(args: argparse.Namespace, directory: str) -> dict[str, float]:
    clock = ManualClock()
    n = args.partitions
    node = Node(directory, n, args.fs == "memory", clock)
    value = b"x" * args.record_bytes
    sequences = [0] * n

    def batch(p: int) -> bytes:
        if not args.idempotent:
            return build_batch([(None, value, (), 1_700_000_000_000)])
        sequences[p] += 1
        return build_batch([(None, value, (), 1_700_000_000_000)], producer_id=1000, producer_epoch=0,
                           base_sequence=sequences[p] - 1)

    for p in range(n):  # one batch everywhere first: the steady state
        await node.serve(encode_request(produce_request(args.version, {p: batch(p)}), 0, "rdkafka"))
    gc.freeze()
    cpu: list[float] = []
    nxt = 0
    for r in range(args.requests):
        partitions = [(nxt + i) % n for i in range(args.per_request)]
        nxt += args.per_request
        frame = encode_request(produce_request(args.version, {p: batch(p) for p in partitions}), r, "rdkafka")
        t0 = time.process_time()
        await node.serve(frame)
        cpu.append(time.process_time() - t0)
    median = statistics.median(cpu)
    return {"request_ms": median * 1e3, "batch_us": median / args.per_request * 1e6}


def main() -> int:
    ap = in_process_options(partitions=10_000, record_bytes=1000)
    ap.add_argument("--per-request", type=int, default=500, help="partitions (one batch each) per request")
    ap.add_argument("--version", type=int, default=10, help="Produce version (confluent-kafka 2.16 sends 10)")
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--idempotent", action="store_true", help="batches of an idempotent producer")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        out = asyncio.run(run(args, directory))
    print(f"{args.label}: Produce v{args.version}, {args.per_request} partitions of one batch per request "
          f"({args.partitions} partitions, {args.fs}): {out['request_ms']:.1f} ms CPU per request (median), "
          f"{out['batch_us']:.1f} us per batch", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
