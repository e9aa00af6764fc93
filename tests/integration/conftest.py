"""Fixtures starting real kmirror processes on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kmirror.testing.processes import LocalCluster, free_port_block


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = LocalCluster(dir=tmp_path / "cluster", port=free_port_block())
    c.up()
    try:
        yield c
    finally:
        c.down()


FAST_FAILURE_DETECTION = {
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
}


@pytest.fixture
def cluster3(tmp_path: Path) -> Iterator[LocalCluster]:
    """Three brokers and a controller, with failure detection in seconds."""
    c = LocalCluster(dir=tmp_path / "cluster3", port=free_port_block(3), nodes=3, overrides=dict(FAST_FAILURE_DETECTION))
    c.up()
    try:
        yield c
    finally:
        c.down()
