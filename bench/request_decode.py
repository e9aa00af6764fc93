"""Cost of the request guards next to kio's own decode, per request.

`decode_request` runs `protocol/length_guard.check_lengths` (array lengths against the frame,
so kio's native reader cannot be made to abort the process) and
`protocol/request_validation.null_field` (nulls in non-nullable fields) around kio's decoder.
This prints, for typical requests, kio's decode time alone and with both guards.

Run: .venv/bin/python bench/request_decode.py [--seconds 1.0]
The machine is shared and noisy: compare the ratios within one run.
"""

from __future__ import annotations

import argparse
import datetime
import io
import statistics
import time
from collections.abc import Callable
from typing import Any

from kio.schema.fetch.v12 import request as fetch
from kio.schema.metadata.v12 import request as metadata
from kio.schema.produce.v9 import request as produce
from kio.serial import entity_reader, entity_writer

from kmirror.broker.api import build_registry
from kmirror.protocol.codec import decode_request


def frame(api_key: int, version: int, body: Any) -> bytes:
    request_type = type(body)
    header_type = request_type.__header_schema__
    buf = io.BytesIO()
    entity_writer(header_type)(buf, header_type(request_api_key=api_key, request_api_version=version,
                                                correlation_id=1, client_id="bench"))
    entity_writer(request_type)(buf, body)
    return buf.getvalue()


def cases() -> dict[str, tuple[int, Any, bytes]]:
    fetch_body = fetch.FetchRequest(
        cluster_id=None, replica_id=-1, max_wait=datetime.timedelta(milliseconds=500), min_bytes=1,
        max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
        topics=tuple(fetch.FetchTopic(topic=f"t{t}", partitions=tuple(
            fetch.FetchPartition(partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                                 log_start_offset=-1, partition_max_bytes=1 << 20) for p in range(50)))
            for t in range(4)),
        forgotten_topics_data=(), rack_id="")
    produce_body = produce.ProduceRequest(
        transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=30),
        topic_data=(produce.TopicProduceData(name="t", partition_data=tuple(
            produce.PartitionProduceData(index=p, records=b"x" * 16_000) for p in range(8))),))
    metadata_body = metadata.MetadataRequest(
        topics=tuple(metadata.MetadataRequestTopic(name=f"topic-{i}", topic_id=None) for i in range(20)),
        allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    return {
        "Fetch v12, 200 partitions": (1, fetch_body, frame(1, 12, fetch_body)),
        "Produce v9, 8 partitions x 16 KB": (0, produce_body, frame(0, 9, produce_body)),
        "Metadata v12, 20 topics": (3, metadata_body, frame(3, 12, metadata_body)),
    }


def per_call_us(action: Callable[[], object], seconds: float) -> float:
    samples = []
    for _ in range(5):
        runs = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds / 5:
            action()
            runs += 1
        samples.append((time.perf_counter() - start) / runs * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=1.0, help="time budget per case")
    seconds = parser.parse_args().seconds
    registry = build_registry(plane="broker")
    print(f"{'request':36} {'kio decode':>12} {'with guards':>12} {'ratio':>6}")
    for name, (_, body, payload) in cases().items():
        request_type = type(body)
        header_type = request_type.__header_schema__
        header_size = entity_reader(header_type)(payload, 0)[1]
        reader = entity_reader(request_type)
        kio_us = per_call_us(lambda r=reader, p=payload, h=header_size: r(p, h), seconds)
        guarded_us = per_call_us(lambda p=payload: decode_request(registry, p), seconds)
        print(f"{name:36} {kio_us:10.1f}us {guarded_us:10.1f}us {guarded_us / kio_us:6.2f}")


if __name__ == "__main__":
    main()
