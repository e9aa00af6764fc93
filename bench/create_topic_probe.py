"""ApiVersions latency and event-loop stalls of one node while it creates a large topic.

Starts a one-node cluster, probes ApiVersions on a new connection every `--interval-ms`,
sends one CreateTopics of `--partitions` partitions and waits until its last partition is
served (ListOffsets). Prints the probes' p50/p99/max before and during the creation, the
node's own event-loop stalls (`kmirror.server:type=EventLoop`), and the load average, which
the probe latencies depend on (the stall count much less).

    .venv/bin/python bench/create_topic_probe.py --partitions 10000 --runs 3
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import tempfile
import threading
import time
from pathlib import Path

from kio.schema.create_topics.v7 import request as ct
from kio.schema.errors import ErrorCode
from kio.schema.list_offsets.v1 import request as lo
from kio.static.primitive import i16, i32

from kmirror.testing.hostile import api_versions_latency_s, call, event_loop_lag, peak_rss_mb, percentile
from kmirror.testing.processes import LocalCluster, free_port_block


def _served(port: int, topic: str, partition: int) -> bool:
    body = lo.ListOffsetsRequest(replica_id=i32(-1), topics=(lo.ListOffsetsTopic(name=topic, partitions=(
        lo.ListOffsetsPartition(partition_index=i32(partition), timestamp=-1),)),))
    return int(call(port, 2, 1, body).topics[0].partitions[0].error_code) == ErrorCode.none


def _probe(port: int, interval_s: float, stop: threading.Event, out: list[float]) -> None:
    while not stop.is_set():
        out.append(api_versions_latency_s(port))
        stop.wait(interval_s)


def _stats(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50_ms": round(percentile(values, 0.5) * 1000, 1),
            "p99_ms": round(percentile(values, 0.99) * 1000, 1), "max_ms": round(max(values, default=0) * 1000, 1)}


def run_once(base: Path, partitions: int, interval_s: float, trace_ms: int) -> dict[str, object]:
    port = free_port_block()
    metrics_port = free_port_block()
    overrides = {"metrics.port": str(metrics_port)}
    if trace_ms:
        overrides["event.loop.stall.log.ms"] = str(trace_ms)
    cluster = LocalCluster(dir=base, port=port, overrides=overrides)
    cluster.up()
    try:
        idle: list[float] = []
        stop = threading.Event()
        t = threading.Thread(target=_probe, args=(port, interval_s, stop, idle))
        t.start()
        time.sleep(5)
        stop.set()
        t.join()
        before = event_loop_lag(metrics_port)
        during: list[float] = []
        stop = threading.Event()
        t = threading.Thread(target=_probe, args=(port, interval_s, stop, during))
        load_before = os.getloadavg()[0]
        started = time.monotonic()
        t.start()
        body = ct.CreateTopicsRequest(topics=(ct.CreatableTopic(
            name="big", num_partitions=i32(partitions), replication_factor=i16(1), assignments=(), configs=()),),
            timeout=datetime.timedelta(seconds=60), validate_only=False)
        response = call(port, 19, 7, body, timeout_s=300)
        answered = time.monotonic() - started
        assert int(response.topics[0].error_code) == 0, response
        while not _served(port, "big", partitions - 1):
            time.sleep(0.5)
        served = time.monotonic() - started
        time.sleep(2)  # the publication's tail
        stop.set()
        t.join()
        after = event_loop_lag(metrics_port)
        return {"partitions": partitions, "load_avg_1m": [round(load_before, 1), round(os.getloadavg()[0], 1)],
                "answered_s": round(answered, 2), "served_s": round(served, 1), "idle": _stats(idle),
                "during": _stats(during), "loop_before": before, "loop_after": after,
                "peak_rss_mb": round(peak_rss_mb(cluster.pid()))}
    finally:
        cluster.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--interval-ms", type=int, default=20)
    parser.add_argument("--trace-ms", type=int, default=0, help="event.loop.stall.log.ms of the node")
    parser.add_argument("--keep", help="directory to keep the cluster in (its server.log)")
    args = parser.parse_args()
    for i in range(args.runs):
        if args.keep:
            base = Path(args.keep) / f"run-{i}"
            print(json.dumps(run_once(base, args.partitions, args.interval_ms / 1000, args.trace_ms)), flush=True)
        else:
            with tempfile.TemporaryDirectory() as d:
                print(json.dumps(run_once(Path(d) / "c", args.partitions, args.interval_ms / 1000, args.trace_ms)),
                      flush=True)


if __name__ == "__main__":
    main()
