"""KIP-1279 MirrorMetadataManager topic sync with real processes: partitions added at the
source are created at the destination and mirrored byte-identical from offset 0; source
topic config changes reach the mirror topic, excluded properties do not, destination-side
changes are reverted; a paused topic is not synced until it is resumed."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

from kmirror.records.batch import iter_batches
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration

TOPIC = "events"
SEGMENT = "00000000000000000000.log"
REFRESH_MS = 500


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[tuple[LocalCluster, LocalCluster]]:
    source = LocalCluster(dir=tmp_path / "source", port=free_port_block())
    source.up()
    dest = LocalCluster(dir=tmp_path / "dest", port=free_port_block(),
                        overrides={"mirror.metadata.refresh.interval.ms": str(REFRESH_MS)})
    try:
        dest.up()
        yield source, dest
    finally:
        dest.down()
        source.down()


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def produce(bootstrap: str, partitions: range, count: int, tag: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(count):
        for p in partitions:
            producer.produce(TOPIC, key=f"{tag}-{i}".encode(), value=f"{tag} {p} {i} ".encode() * 4, partition=p)
    assert producer.flush(30) == 0


def end_offsets(bootstrap: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "enable.auto.commit": False})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10, cached=False)[1]
                for p in range(partitions)]
    finally:
        consumer.close()


def partition_count(bootstrap: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
    return len(topic.partitions)


def dynamic_configs(bootstrap: str) -> dict[str, str]:
    """The topic's configs DescribeConfigs reports as DYNAMIC_TOPIC_CONFIG."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_configs([ConfigResource("topic", TOPIC)]).values()
    entries = future.result(timeout=10)
    return {name: e.value for name, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def segment_batches(cluster: LocalCluster, partition: int) -> list[tuple[int, bytes]]:
    path = cluster.dir / "node-1" / "data" / f"{TOPIC}-{partition}" / SEGMENT
    if not path.exists():
        return []
    raw = path.read_bytes()
    return [(h.base_offset, raw[pos:pos + h.size]) for pos, h in iter_batches(raw)]


def states(bootstrap: str) -> set[str]:
    out = kmirror("mirrors", "--bootstrap-server", bootstrap, "--describe").stdout
    return {line.split()[-1] for line in out.splitlines()[1:] if line.strip()}


def alter_topic(bootstrap: str, *args: str) -> None:
    kmirror("configs", "--bootstrap-server", bootstrap, "--entity-type", "topics", "--entity-name", TOPIC,
            "--alter", *args)


def test_partitions_and_configs(clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path) -> None:
    source, dest = clusters
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC,
            "--partitions", "2", "--replication-factor", "1", "--config", "retention.ms=100000")
    produce(source.bootstrap, range(2), 20, "first")

    kmirror("features", "--bootstrap-server", dest.bootstrap, "upgrade", "--feature", "mirror.version=1")
    config = tmp_path / "mirror.properties"
    config.write_text(f"bootstrap.servers={source.bootstrap}\n")
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--create", "--mirror", "m",
            "--mirror-config", str(config))
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", "m", "--topic", TOPIC)
    wait_until(lambda: end_offsets(dest.bootstrap, 2) == end_offsets(source.bootstrap, 2), "the first records")
    assert dynamic_configs(dest.bootstrap) == {"retention.ms": "100000"}

    # Partition expansion: the new partitions are created and mirrored from offset 0.
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--alter", "--topic", TOPIC, "--partitions", "4")
    produce(source.bootstrap, range(4), 15, "second")
    wait_until(lambda: partition_count(dest.bootstrap) == 4, "4 partitions at the destination")
    source_ends = end_offsets(source.bootstrap, 4)
    assert all(end > 0 for end in source_ends)
    wait_until(lambda: end_offsets(dest.bootstrap, 4) == source_ends, "every partition caught up")
    for p in range(4):
        wait_until(lambda p=p: len(segment_batches(dest, p)) == len(segment_batches(source, p)),
                   f"partition {p} segment")
        assert segment_batches(dest, p) == segment_batches(source, p)  # same offsets, same bytes
    assert segment_batches(dest, 3)[0][0] == 0

    # Config sync: SET changed/added, DELETE removed; an excluded property is not copied.
    alter_topic(source.bootstrap, "--add-config", "retention.ms=200000,segment.ms=3600000,min.insync.replicas=1")
    wait_until(lambda: dynamic_configs(dest.bootstrap).get("segment.ms") == "3600000", "segment.ms copied")
    assert dynamic_configs(dest.bootstrap) == {"retention.ms": "200000", "segment.ms": "3600000"}
    alter_topic(source.bootstrap, "--delete-config", "segment.ms")
    wait_until(lambda: "segment.ms" not in dynamic_configs(dest.bootstrap), "segment.ms deleted")
    assert dynamic_configs(dest.bootstrap) == {"retention.ms": "200000"}

    # A destination-side change is reverted; a destination-side excluded property is left alone.
    alter_topic(dest.bootstrap, "--add-config", "retention.ms=5000,min.insync.replicas=1")
    wait_until(lambda: dynamic_configs(dest.bootstrap).get("retention.ms") == "200000", "retention.ms reverted")
    assert dynamic_configs(dest.bootstrap) == {"retention.ms": "200000", "min.insync.replicas": "1"}

    # Paused: no sync (neither source changes nor reverting destination ones).
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--pause", "--topic", TOPIC)
    wait_until(lambda: states(dest.bootstrap) == {"PAUSED"}, "partitions PAUSED")
    alter_topic(source.bootstrap, "--add-config", "retention.ms=300000")
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--alter", "--topic", TOPIC, "--partitions", "5")
    alter_topic(dest.bootstrap, "--add-config", "retention.ms=7000")
    time.sleep(10 * REFRESH_MS / 1000)  # ten refresh cycles: none may sync a paused topic
    assert dynamic_configs(dest.bootstrap)["retention.ms"] == "7000"
    assert partition_count(dest.bootstrap) == 4

    # Resumed: the sync catches up.
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--resume", "--topic", TOPIC)
    wait_until(lambda: dynamic_configs(dest.bootstrap).get("retention.ms") == "300000", "sync resumed")
    wait_until(lambda: partition_count(dest.bootstrap) == 5, "5 partitions at the destination")
    produce(source.bootstrap, range(5), 5, "third")
    source_ends = end_offsets(source.bootstrap, 5)
    wait_until(lambda: end_offsets(dest.bootstrap, 5) == source_ends, "the fifth partition mirrored")
    wait_until(lambda: states(dest.bootstrap) == {"MIRRORING"}, "every partition MIRRORING")


def test_another_source_cluster_at_the_same_address_halts_fetching_and_sync(tmp_path: Path) -> None:
    """The source is replaced by another cluster on the same port: nothing of it is copied
    and the sync writes nothing; with the original source back, mirroring goes on."""
    port = free_port_block()
    source = LocalCluster(dir=tmp_path / "source", port=port)
    impostor = LocalCluster(dir=tmp_path / "impostor", port=port)
    dest = LocalCluster(dir=tmp_path / "dest", port=free_port_block(),
                        overrides={"mirror.metadata.refresh.interval.ms": str(REFRESH_MS)})
    source.up()
    try:
        dest.up()
        kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC,
                "--partitions", "1", "--replication-factor", "1")
        produce(source.bootstrap, range(1), 10, "first")
        kmirror("features", "--bootstrap-server", dest.bootstrap, "upgrade", "--feature", "mirror.version=1")
        config = tmp_path / "mirror.properties"
        config.write_text(f"bootstrap.servers={source.bootstrap}\n")
        kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--create", "--mirror", "m",
                "--mirror-config", str(config))
        kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", "m", "--topic", TOPIC)
        wait_until(lambda: end_offsets(dest.bootstrap, 1) == [10], "the first records")
        mirrored = segment_batches(dest, 0)

        source.down()
        impostor.up()
        kmirror("topics", "--bootstrap-server", impostor.bootstrap, "--create", "--topic", TOPIC,
                "--partitions", "2", "--replication-factor", "1", "--config", "retention.ms=1234")
        produce(impostor.bootstrap, range(2), 30, "impostor")
        wait_until(lambda: "fetching halted" in dest.log_text(), "the fetch halt")
        wait_until(lambda: "metadata sync halted" in dest.log_text(), "the sync halt")
        time.sleep(10 * REFRESH_MS / 1000)  # ten refresh cycles: nothing of the impostor is copied
        assert segment_batches(dest, 0) == mirrored
        assert partition_count(dest.bootstrap) == 1
        assert "retention.ms" not in dynamic_configs(dest.bootstrap)
        assert dest.log_text().count("fetching halted") == 1
        assert dest.log_text().count("metadata sync halted") == 1

        impostor.down()
        source.start_node(1)
        produce(source.bootstrap, range(1), 5, "second")
        wait_until(lambda: end_offsets(dest.bootstrap, 1) == [15], "mirroring after the source is back")
        assert segment_batches(dest, 0) == segment_batches(source, 0)
        assert "fetching resumes" in dest.log_text()
    finally:
        dest.down()
        impostor.down()
        source.down()
