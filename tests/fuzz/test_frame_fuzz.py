"""Seeded frame fuzzing of a live node over every API key and version it advertises.

Invariants: the node never exits, logs no traceback, keeps its peak RSS under a bound, and a
well-behaved client producing alongside sees no error and an ack p99 under 1 s. The default
run sends 20,000 frames; `-m slow` sends 1,000,000. A failure prints the seed
(KMIRROR_FUZZ_SEED replays it)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kmirror.broker.api import build_registry
from kmirror.testing.fuzz import FrameFuzzer, advertised_api_keys, seed_corpus
from kmirror.testing.hostile import WellBehavedClient, peak_rss_mb, percentile
from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.processes import LocalCluster, free_port_block

pytestmark = pytest.mark.integration

RSS_BOUND_MB = 500


@pytest.fixture
def node(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(dir=tmp_path / "fuzzed", port=free_port_block())
    c.up()
    try:
        yield c
    finally:
        c.down()


def _fuzz(node: LocalCluster, frames: int) -> None:
    seed = int(os.environ.get("KMIRROR_FUZZ_SEED", str(int(time.time()) % 100_000)))
    print(f"fuzz seed {seed} (KMIRROR_FUZZ_SEED={seed} replays it)")
    advertised = advertised_api_keys("127.0.0.1", node.port)
    registry = build_registry(plane="broker")
    corpus = seed_corpus(registry, advertised)
    assert {key for key, _ in corpus} == advertised
    create_topic(node.bootstrap, "served")
    pid = node.pid()
    started = time.monotonic()
    with WellBehavedClient(node.bootstrap, node.port, "served", interval_s=0.05) as client:
        client.wait_acks(5)
        stats = asyncio.run(FrameFuzzer(corpus, seed, registry).run("127.0.0.1", node.port, frames))
        client.wait_acks(5)
    took = time.monotonic() - started
    log = (node.dir / "node-1" / "server.log").read_text(errors="replace")
    peak = peak_rss_mb(pid)
    ack_p99 = percentile(client.ack_latencies_s, 0.99)
    print(f"seed {seed}: {stats.frames} frames ({stats.answered} answered, {stats.connections} connections) over "
          f"{len(stats.api_keys)} API keys / {len(corpus)} key-versions in {took:.0f} s; peak RSS {peak:.0f} MB; "
          f"well-behaved client: {client.summary()}")
    assert not stats.refused and node.serving(), f"seed {seed}: node exited: {log[-3000:]}"
    assert "Traceback" not in log, f"seed {seed}: " + log[log.index("Traceback") - 300:][:3000]
    assert peak < RSS_BOUND_MB, f"seed {seed}"
    assert not client.errors, f"seed {seed}: {client.errors[:5]}"
    assert ack_p99 < 1.0, f"seed {seed}: ack p99 {ack_p99:.3f} s"
    assert stats.frames == frames - frames % 8


def test_frame_fuzz_short(node: LocalCluster) -> None:
    _fuzz(node, 20_000)


@pytest.mark.slow
@pytest.mark.timeout(3600)
def test_frame_fuzz_million(node: LocalCluster) -> None:
    _fuzz(node, 1_000_000)
