"""KIP-1279 MirrorMetadataManager topic sync with real processes: partitions added at the
source are created at the destination and mirrored byte-identical from offset 0; source
topic config changes reach the mirror topic, excluded properties do not, destination-side
changes are reverted; a paused topic is not synced until it is resumed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource

from kmirror.testing.kafka_clients import end_offsets, partition_count
from kmirror.testing.mirror_clusters import create_mirror, partition_states, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.segments import log_batches

pytestmark = pytest.mark.integration

TOPIC = "events"
REFRESH_MS = 500


@pytest.fixture
def dest_overrides() -> dict[str, str]:
    return {"mirror.metadata.refresh.interval.ms": str(REFRESH_MS)}


def produce(bootstrap: str, partitions: range, count: int, tag: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    for i in range(count):
        for p in partitions:
            producer.produce(TOPIC, key=f"{tag}-{i}".encode(), value=f"{tag} {p} {i} ".encode() * 4, partition=p)
    assert producer.flush(30) == 0


def dynamic_configs(bootstrap: str) -> dict[str, str]:
    """The topic's configs DescribeConfigs reports as DYNAMIC_TOPIC_CONFIG."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_configs([ConfigResource("topic", TOPIC)]).values()
    entries = future.result(timeout=10)
    return {name: e.value for name, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def alter_topic(bootstrap: str, *args: str) -> None:
    kmirror("configs", "--bootstrap-server", bootstrap, "--entity-type", "topics", "--entity-name", TOPIC,
            "--alter", *args)


def test_partitions_and_configs(clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path) -> None:
    source, dest = clusters
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC,
            "--partitions", "2", "--replication-factor", "1", "--config", "retention.ms=100000")
    produce(source.bootstrap, range(2), 20, "first")

    create_mirror(dest, source, "m", TOPIC, tmp_path / "mirror.properties")
    wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, 2) == end_offsets(source.bootstrap, TOPIC, 2), "the first records")
    assert dynamic_configs(dest.bootstrap) == {"retention.ms": "100000"}

    # Partition expansion: the new partitions are created and mirrored from offset 0.
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--alter", "--topic", TOPIC, "--partitions", "4")
    produce(source.bootstrap, range(4), 15, "second")
    wait_until(lambda: partition_count(dest.bootstrap, TOPIC) == 4, "4 partitions at the destination")
    source_ends = end_offsets(source.bootstrap, TOPIC, 4)
    assert all(end > 0 for end in source_ends)
    wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, 4) == source_ends, "every partition caught up")
    for p in range(4):
        wait_until(lambda p=p: len(log_batches(dest, TOPIC, p)) == len(log_batches(source, TOPIC, p)),
                   f"partition {p} segment")
        assert log_batches(dest, TOPIC, p) == log_batches(source, TOPIC, p)  # same offsets, same bytes
    assert log_batches(dest, TOPIC, 3)[0][0] == 0

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
    wait_until(lambda: set(partition_states(dest.bootstrap, TOPIC).values()) == {"PAUSED"}, "partitions PAUSED")
    alter_topic(source.bootstrap, "--add-config", "retention.ms=300000")
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--alter", "--topic", TOPIC, "--partitions", "5")
    alter_topic(dest.bootstrap, "--add-config", "retention.ms=7000")
    time.sleep(10 * REFRESH_MS / 1000)  # ten refresh cycles: none may sync a paused topic
    assert dynamic_configs(dest.bootstrap)["retention.ms"] == "7000"
    assert partition_count(dest.bootstrap, TOPIC) == 4

    # Resumed: the sync catches up.
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--resume", "--topic", TOPIC)
    wait_until(lambda: dynamic_configs(dest.bootstrap).get("retention.ms") == "300000", "sync resumed")
    wait_until(lambda: partition_count(dest.bootstrap, TOPIC) == 5, "5 partitions at the destination")
    produce(source.bootstrap, range(5), 5, "third")
    source_ends = end_offsets(source.bootstrap, TOPIC, 5)
    wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, 5) == source_ends, "the fifth partition mirrored")
    wait_until(lambda: set(partition_states(dest.bootstrap, TOPIC).values()) == {"MIRRORING"}, "every partition MIRRORING")


def test_another_source_cluster_at_the_same_address_halts_fetching_and_sync(tmp_path: Path) -> None:
    """The source is replaced by another cluster on the same port: nothing of it is copied,
    the sync writes nothing and an --add of its topic is refused; with the original source
    back, mirroring goes on."""
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
        create_mirror(dest, source, "m", TOPIC, tmp_path / "mirror.properties")
        wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, 1) == [10], "the first records")
        mirrored = log_batches(dest, TOPIC, 0)

        source.down()
        impostor.up()
        kmirror("topics", "--bootstrap-server", impostor.bootstrap, "--create", "--topic", TOPIC,
                "--partitions", "2", "--replication-factor", "1", "--config", "retention.ms=1234")
        produce(impostor.bootstrap, range(2), 30, "impostor")
        wait_until(lambda: "fetching halted" in dest.log_text(), "the fetch halt")
        wait_until(lambda: "metadata sync halted" in dest.log_text(), "the sync halt")
        time.sleep(10 * REFRESH_MS / 1000)  # ten refresh cycles: nothing of the impostor is copied
        assert log_batches(dest, TOPIC, 0) == mirrored
        assert partition_count(dest.bootstrap, TOPIC) == 1
        assert "retention.ms" not in dynamic_configs(dest.bootstrap)
        assert dest.log_text().count("fetching halted") == 1
        assert dest.log_text().count("metadata sync halted") == 1
        # an --add naming the other cluster's topic is refused: recording that cluster's id
        # would lift the halt and bind the mirror's existing copies to it
        kmirror("topics", "--bootstrap-server", impostor.bootstrap, "--create", "--topic", "elsewhere",
                "--partitions", "1", "--replication-factor", "1")
        added = kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", "m",
                        "--topic", "elsewhere", check=False)
        assert added.returncode != 0 and "INCONSISTENT_CLUSTER_ID" in added.stderr + added.stdout
        assert "is not the mirror's" in added.stderr + added.stdout
        assert "elsewhere" not in kmirror("topics", "--bootstrap-server", dest.bootstrap, "--list").stdout.split()

        impostor.down()
        source.start_node(1)
        produce(source.bootstrap, range(1), 5, "second")
        wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, 1) == [15], "mirroring after the source is back")
        assert log_batches(dest, TOPIC, 0) == log_batches(source, TOPIC, 0)
        assert "fetching resumes" in dest.log_text()
    finally:
        dest.down()
        impostor.down()
        source.down()
