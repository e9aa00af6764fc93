"""Seeded frame fuzzing of a live node over every API key and version it advertises.

Invariants: the node never exits, logs no traceback, keeps its peak RSS under a bound, and a
well-behaved client producing alongside sees no error and an ack p99 under 1 s. The default
run sends 20,000 frames; `-m slow` sends 1,000,000. A failure prints the seed
(KMIRROR_FUZZ_SEED replays it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kmirror.broker.api import build_registry
from kmirror.runtime.local_cluster import CONTROLLER_PORT_OFFSET
from kmirror.testing.fuzz import advertised_api_keys, seed_corpus
from kmirror.testing.hostile import WellBehavedClient, event_loop_lag, peak_rss_mb, percentile, process_cpu_s
from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.processes import LocalCluster, free_port_block

pytestmark = pytest.mark.integration

RSS_BOUND_MB = 500


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[LocalCluster, int]]:
    metrics_port = free_port_block()
    c = LocalCluster(dir=tmp_path / "fuzzed", port=free_port_block(), overrides={
        "metrics.port": str(metrics_port), "event.loop.stall.log.ms": "200"})  # a long stall names its code
    c.up()
    try:
        yield c, metrics_port
    finally:
        c.down()


def _fuzz(node: LocalCluster, metrics_port: int, frames: int) -> None:
    seed = int(os.environ.get("KMIRROR_FUZZ_SEED", str(int(time.time()) % 100_000)))
    print(f"fuzz seed {seed} (KMIRROR_FUZZ_SEED={seed} replays it)")
    advertised = advertised_api_keys("127.0.0.1", node.port)
    corpus = seed_corpus(build_registry(plane="broker"), advertised)
    assert {key for key, _ in corpus} == advertised
    create_topic(node.bootstrap, "served")
    pid = node.pid()
    cpu_before = process_cpu_s(pid)
    started = time.monotonic()
    with WellBehavedClient(node.bootstrap, node.port, "served", interval_s=0.05) as client:
        client.wait_acks(5)
        # the fuzzer runs in a process of its own: its CPU must not delay the measuring client
        fuzzer = subprocess.run([sys.executable, "-m", "kmirror.testing.fuzz", "--port", str(node.port),
                                 "--frames", str(frames), "--seed", str(seed)],
                                capture_output=True, text=True, timeout=3500, check=True)
        client.wait_acks(5)
    stats = json.loads(fuzzer.stdout.splitlines()[-1])
    cpu_us_per_frame = (process_cpu_s(pid) - cpu_before) / stats["frames"] * 1e6
    took = time.monotonic() - started
    log = (node.dir / "node-1" / "server.log").read_text(errors="replace")
    peak = peak_rss_mb(pid)
    loop = event_loop_lag(metrics_port)
    ack_p99 = percentile(client.ack_latencies_s, 0.99)
    print(f"seed {seed}: {stats['frames']} frames ({stats['answered']} answered, {stats['connections']} connections) "
          f"over {len(stats['api_keys'])} API keys / {len(stats['key_versions'])} key-versions in {took:.0f} s "
          f"({stats['frames'] / stats['seconds']:.0f} frames/s, node CPU {cpu_us_per_frame:.0f} us/frame); peak RSS {peak:.0f} MB; event loop {loop}; "
          f"well-behaved client: {client.summary()}; load average {os.getloadavg()}")
    assert not stats["refused"] and node.serving(), f"seed {seed}: node exited: {log[-3000:]}"
    assert "Traceback" not in log, f"seed {seed}: " + log[log.index("Traceback") - 300:][:3000]
    assert peak < RSS_BOUND_MB, f"seed {seed}"
    assert not client.errors, f"seed {seed}: {client.errors[:5]}"
    assert ack_p99 < 1.0, f"seed {seed}: ack p99 {ack_p99:.3f} s"
    assert stats["frames"] == frames - frames % 8
    if frames >= 100_000:  # every advertised API key and version was sent
        assert {tuple(kv) for kv in stats["key_versions"]} == set(corpus), f"seed {seed}"


def test_frame_fuzz_short(node: tuple[LocalCluster, int]) -> None:
    _fuzz(*node, 20_000)


def test_controller_listener_fuzz(tmp_path: Path) -> None:
    """Hostile frames on a dedicated controller's listener (broker registrations and heartbeats
    with lying ids and epochs, metadata fetches, admin writes): no node logs an internal error
    or stops, and an acks=all producer writing to three replicas meanwhile sees no error."""
    seed = int(os.environ.get("KMIRROR_FUZZ_SEED", str(int(time.time()) % 100_000)))
    print(f"fuzz seed {seed} (KMIRROR_FUZZ_SEED={seed} replays it)")
    with LocalCluster(dir=tmp_path / "c", port=free_port_block(3), nodes=3) as cluster:
        create_topic(cluster.bootstrap, "served", replication_factor=3)
        with WellBehavedClient(cluster.bootstrap, cluster.port, "served", interval_s=0.05) as client:
            client.wait_acks(5)
            subprocess.run([sys.executable, "-m", "kmirror.testing.fuzz", "--port",
                            str(cluster.port + CONTROLLER_PORT_OFFSET), "--plane", "controller",
                            "--frames", "20000", "--seed", str(seed)],
                           capture_output=True, text=True, timeout=600, check=True)
            client.wait_acks(5)
        for node_id in cluster.node_ids():
            log = cluster.log_text(node_id)
            assert cluster.serving(node_id), f"seed {seed}: node {node_id} stopped: {log[-3000:]}"
            assert "Traceback" not in log, f"seed {seed}: node {node_id}: " + log[log.index("Traceback") - 300:][:3000]
        assert not client.errors, f"seed {seed}: {client.errors[:5]}"


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_frame_fuzz_million(node: tuple[LocalCluster, int]) -> None:
    _fuzz(*node, 1_000_000)
