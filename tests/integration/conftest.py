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
