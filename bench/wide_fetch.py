"""A consumer's sessionless Fetch of a wide topic, in one process: node CPU per request.

librdkafka (confluent-kafka) does not use fetch sessions (KIP-227): each of its Fetch
requests lists every partition it consumes from the node, and the answer carries every one
of them, with records or without. A consumer of a 10,000-partition topic makes the node
decode, read and answer 10,000 partitions per request, most of them idle. This bench times
that path (decode -> handler -> encode, `bench/mirror_batch_path.Node`, no socket) for one
request over `--partitions` partitions of which `--active` have one new batch of
`--record-bytes`, with `min_bytes` 1 and no wait, as librdkafka's fetches are answered once
data is there. CPU time per request and per partition; holds on a busy machine.

Another tree's code: `PYTHONPATH=OTHER/src .venv/bin/python bench/wide_fetch.py`.

    .venv/bin/python bench/wide_fetch.py [--partitions 10000] [--active 100] [--version 16]
        [--requests 20] [--fs disk|memory]
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

from mirror_batch_path import TOPIC_ID, Node, in_process_options

from kmirror.client.protocol import encode_request, request_schema
from kmirror.ports import ManualClock
from kmirror.protocol.entities import build, nested
from kmirror.records.builder import build_batch
from kmirror.types import TopicPartition


def fetch_request(version: int, n: int, offsets: list[int], isolation_level: int = 0) -> Any:
    """A sessionless consumer Fetch of partitions 0..n-1 of topic "t" at `offsets`."""
    schema = request_schema(1, version)
    topic_type, partition_type = nested(schema, "FetchTopic"), nested(schema, "FetchPartition")
    partition_fields: dict[str, Any] = {"current_leader_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}
    if version >= 12:
        partition_fields["last_fetched_epoch"] = -1
    partitions = tuple(build(partition_type, partition=p, fetch_offset=offsets[p], **partition_fields) for p in range(n))
    topic = build(topic_type, topic_id=TOPIC_ID, partitions=partitions) if version >= 13 else \
        build(topic_type, topic="t", partitions=partitions)
    fields: dict[str, Any] = {"max_wait": datetime.timedelta(milliseconds=500), "min_bytes": 1, "max_bytes": 50 << 20,
                              "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1, "topics": (topic,),
                              "forgotten_topics_data": (), "rack_id": ""}
    if version < 15:
        fields["replica_id"] = -1
    return build(schema, **fields)


async def run(args: argparse.Namespace, directory: str) -> dict[str, float]:
    clock = ManualClock()
    n = args.partitions
    node = Node(directory, n, args.fs == "memory", clock)
    value = b"x" * args.record_bytes

    def append(partitions: list[int]) -> None:
        node.rm.append_records({TopicPartition("t", p): build_batch([(None, value, (), 1_700_000_000_000)])
                                for p in partitions}, 1)

    append(list(range(n)))  # one batch everywhere
    gc.freeze()
    offsets = [1] * n
    cpu: list[float] = []
    answered = 0
    for r in range(args.requests):
        active = [(r * args.active + i) % n for i in range(args.active)]
        append(active)  # new batches on `--active` partitions since the last fetch
        frame = encode_request(fetch_request(args.version, n, offsets, args.isolation_level), r, "rdkafka")
        t0 = time.process_time()
        answer = await node.serve(frame)
        cpu.append(time.process_time() - t0)
        answered += len(answer)
        for p in active:
            offsets[p] += 1
    median = statistics.median(cpu)  # the machine is shared: the median holds better than the mean
    return {"request_ms": median * 1e3, "partition_us": median / n * 1e6,
            "response_kb": answered / args.requests / 1e3}


def main() -> int:
    ap = in_process_options(partitions=10_000, record_bytes=1000)
    ap.add_argument("--active", type=int, default=100, help="partitions with a new batch per request")
    ap.add_argument("--version", type=int, default=16, help="Fetch version (confluent-kafka 2.16 sends 16)")
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--isolation-level", type=int, default=0, choices=(0, 1))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        out = asyncio.run(run(args, directory))
    print(f"{args.label}: Fetch v{args.version}, {args.partitions} partitions ({args.active} with a new batch): "
          f"{out['request_ms']:.1f} ms CPU per request (median), {out['partition_us']:.2f} us per partition, "
          f"{out['response_kb']:.0f} kB answered", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
