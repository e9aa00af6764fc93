"""Fixtures starting real kmirror processes on loopback."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kmirror.cli.main import main as cli_main
from kmirror.testing.mirror_clusters import clusters_up
from kmirror.testing.processes import FAST_FAILURE_DETECTION, LocalCluster, free_port_block, use_cli_main
from kmirror.testing.spark import spark_session

# The read-only commands tests poll (`mirrors --describe`, `topics --describe` through
# kmirror.testing.mirror_clusters) run in the test process: see `kmirror_in_process`.
use_cli_main(cli_main)

# Every Spark JVM the tests start (the `spark` sessions, the `kmirror verify` commands and the
# scripts tests run, which inherit this environment; local-cluster executors too) runs a few
# small jobs and stops: it spends more of its CPU compiling Spark's classes than running them.
# The quick tier of the JIT alone and the serial collector take about half the CPU of the
# defaults (a streaming test's driver: 15 CPU-seconds instead of 29) for the same jobs.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("PYSPARK_SUBMIT_ARGS", f"--driver-java-options '{TEST_JVM_OPTIONS}' "
                      f"--conf 'spark.executor.extraJavaOptions={TEST_JVM_OPTIONS}' pyspark-shell")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(dir=tmp_path / "cluster", port=free_port_block()) as c:
        yield c



@pytest.fixture
def cluster3(tmp_path: Path) -> Iterator[LocalCluster]:
    """Three brokers and a controller, with failure detection in seconds."""
    with LocalCluster(dir=tmp_path / "cluster3", port=free_port_block(3), nodes=3, overrides=dict(FAST_FAILURE_DETECTION)) as c:
        yield c


@pytest.fixture
def cluster_overrides() -> dict[str, str]:
    """Broker configs of both `clusters`; a module overrides this fixture to change them."""
    return {}


@pytest.fixture
def source_overrides() -> dict[str, str]:
    """Broker configs of the `clusters` source only, over `cluster_overrides`."""
    return {}


@pytest.fixture
def dest_overrides() -> dict[str, str]:
    """Broker configs of the `clusters` destination only, over `cluster_overrides`."""
    return {}


@pytest.fixture
def clusters(tmp_path: Path, cluster_overrides: dict[str, str], source_overrides: dict[str, str],
             dest_overrides: dict[str, str]) -> Iterator[tuple[LocalCluster, LocalCluster]]:
    """Two single-node clusters, (source, destination), each on its own port block."""
    source = LocalCluster(dir=tmp_path / "source", port=free_port_block(),
                          overrides={**cluster_overrides, **source_overrides})
    dest = LocalCluster(dir=tmp_path / "dest", port=free_port_block(), overrides={**cluster_overrides, **dest_overrides})
    with clusters_up(source, dest):
        yield source, dest


@pytest.fixture(scope="module")
def module_cluster3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """`cluster3` shared by a module's tests: each uses its own topics, and a test that kills
    brokers starts them again or comes last in its module."""
    with LocalCluster(dir=tmp_path_factory.mktemp("cluster3"), port=free_port_block(3), nodes=3,
                      overrides=dict(FAST_FAILURE_DETECTION)) as c:
        yield c


@pytest.fixture(scope="module")
def module_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One single-node cluster shared by a module's tests (each uses its own topics)."""
    with LocalCluster(dir=tmp_path_factory.mktemp("node"), port=free_port_block()) as c:
        yield c


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """One local[2] SparkSession per module (a session takes 6-9 s to start), `kmirror` registered."""
    with spark_session() as session:
        yield session
