"""Incremental fetch sessions (KIP-227) with real processes: the mirror fetcher of cluster B
reads cluster A in a session (A's FetchSessionCache gauges show it and the partitions it
holds), follows new records on a few of many partitions byte for byte (`--describe --state`
filters the partitions), and mirrors just as
well from a source that keeps no session (`max.incremental.fetch.session.cache.slots=0`,
as a Kafka-compatible source without KIP-227 answers). A real client that opens sessions
(kafka-python) reads every record of a many-partition topic through incremental fetches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from kmirror.testing.kafka_clients import consume_partition, create_topic, end_offsets, produce_acked
from kmirror.testing.metrics_scrape import scrape
from kmirror.testing.mirror_clusters import create_mirror, describe, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration

TOPIC = "wide"
PARTITIONS = 24
MIRROR = "dr"
SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
CACHED = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"


@pytest.fixture
def cluster_overrides() -> dict[str, str]:
    return {"mirror.metadata.refresh.interval.ms": "300"}


@pytest.fixture
def source_overrides(request: pytest.FixtureRequest) -> dict[str, str]:
    slots = getattr(request, "param", "1000")
    return {"metrics.port": str(free_port_block()), "max.incremental.fetch.session.cache.slots": slots}


def caught_up(dest: LocalCluster, ends: list[int]) -> bool:
    rows = {p: row for (_, t, p), row in describe(dest.bootstrap).items() if t == TOPIC}
    return len(rows) == PARTITIONS and all(rows[p][1] == ends[p] and rows[p][3] == "MIRRORING" for p in rows)


def mirror_and_follow(source: LocalCluster, dest: LocalCluster, tmp_path: Path) -> None:
    """Mirror TOPIC to caught-up, then new records on three partitions arrive byte for byte."""
    create_topic(source.bootstrap, TOPIC, PARTITIONS)
    produce_acked(source.bootstrap, TOPIC, 2 * PARTITIONS, PARTITIONS, prefix="first")
    create_mirror(dest, source, MIRROR, TOPIC, tmp_path / "mirror.properties")
    wait_until(lambda: caught_up(dest, end_offsets(source.bootstrap, TOPIC, PARTITIONS)), "mirror caught up")
    later = produce_acked(source.bootstrap, TOPIC, 30, 3, prefix="later")  # partitions 0, 1, 2 only
    ends = end_offsets(source.bootstrap, TOPIC, PARTITIONS)
    wait_until(lambda: caught_up(dest, ends), "new records mirrored")
    for p in range(3):
        mirrored = {m.offset(): m.value() for m in consume_partition(dest.bootstrap, TOPIC, p, ends[p])}
        assert all(mirrored[offset] == value for (q, offset), value in later.items() if q == p)


def test_mirror_fetches_the_source_in_an_incremental_session(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    mirror_and_follow(source, dest, tmp_path)
    samples = scrape(int(source.overrides["metrics.port"]))
    assert samples[SESSIONS] >= 1
    assert samples[CACHED] >= PARTITIONS  # the session holds every mirrored partition
    # --describe --state keeps the partitions in the named states
    assert len(describe(dest.bootstrap, "--state", "preparing,Mirroring")) == PARTITIONS
    failed = kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--describe", "--state", "FAILED")
    assert failed.returncode == 0 and TOPIC not in failed.stdout, failed.stdout
    wrong = kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--describe", "--state", "RUNNING", check=False)
    assert wrong.returncode != 0 and "not a partition state" in wrong.stderr and wrong.stderr.count("\n") <= 2


@pytest.mark.parametrize("source_overrides", ["0"], indirect=True)
def test_mirror_from_a_source_that_keeps_no_fetch_session(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    mirror_and_follow(source, dest, tmp_path)
    samples = scrape(int(source.overrides["metrics.port"]))
    assert samples[SESSIONS] == 0 and samples[CACHED] == 0


@pytest.fixture
def source_node(tmp_path: Path, source_overrides: dict[str, str]) -> Iterator[LocalCluster]:
    """A source alone, for a client's fetch sessions (no mirror, no destination)."""
    with LocalCluster(dir=tmp_path / "source", port=free_port_block(), overrides=source_overrides) as c:
        yield c


def test_kafka_python_reads_many_partitions_through_an_incremental_session(source_node: LocalCluster) -> None:
    source = source_node
    create_topic(source.bootstrap, TOPIC, PARTITIONS)
    acked = produce_acked(source.bootstrap, TOPIC, 10 * PARTITIONS, PARTITIONS)
    consumer = KafkaConsumer(bootstrap_servers=source.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100,
                             consumer_timeout_ms=500)
    consumer.assign([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    consumer.seek_to_beginning()
    seen: dict[tuple[int, int], bytes] = {}
    port = int(source.overrides["metrics.port"])

    def read() -> bool:
        for record in consumer:
            seen[(record.partition, record.offset)] = record.value
        return len(seen) >= len(acked) and scrape(port)[SESSIONS] >= 1

    try:
        wait_until(read, "kafka-python read every record in a fetch session")
    finally:
        consumer.close()
    assert seen == acked
    assert scrape(port)[CACHED] >= PARTITIONS
