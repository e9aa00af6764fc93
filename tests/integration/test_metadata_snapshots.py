"""The metadata log is bounded (KIP-630): nodes snapshot their metadata image and delete the log
below the snapshot; a broker that comes back below the controller's log start loads the
controller's snapshot (FetchSnapshot) and knows exactly what the others know, deletions
included; a controller restarts from its snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from kmirror.metadata.snapshot import batch_entries
from kmirror.runtime.local_cluster import CONTROLLER_NODE_ID
from kmirror.runtime.metadata_log import METADATA_PARTITION_DIR, SNAPSHOT_SUFFIX
from kmirror.testing.acked_writer import partition_layout
from kmirror.testing.kafka_clients import consume_partition, create_topic, produce_acked
from kmirror.testing.metrics_scrape import scrape
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import FAST_FAILURE_DETECTION, LocalCluster, free_port_block

pytestmark = pytest.mark.integration

SNAPSHOTS_EVERY_2_KB = {
    **FAST_FAILURE_DETECTION,
    "metadata.log.max.record.bytes.between.snapshots": "2048",
    "metadata.max.retention.bytes": "0",  # everything below the latest snapshot may go
}


def metadata_dir(cluster: LocalCluster, node_id: int) -> Path:
    return cluster.dir / f"node-{node_id}" / "data" / METADATA_PARTITION_DIR


def log_start(cluster: LocalCluster, node_id: int) -> int:
    return min(int(p.stem) for p in metadata_dir(cluster, node_id).glob("*.log"))


def log_end(cluster: LocalCluster, node_id: int) -> int:
    """Of a stopped node: the offset after its last stored metadata record."""
    segments = sorted(metadata_dir(cluster, node_id).glob("*.log"))
    entries = batch_entries(segments[-1].read_bytes())
    return entries[-1][0] + 1 if entries else int(segments[-1].stem)


def snapshot_ends(cluster: LocalCluster, node_id: int) -> list[int]:
    return sorted(int(p.name.split("-")[0]) for p in metadata_dir(cluster, node_id).glob("*" + SNAPSHOT_SUFFIX))


def topics_seen_by(bootstrap: str) -> dict[str, dict[int, tuple[int, ...]]]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {name: {p: tuple(m.replicas) for p, m in t.partitions.items()}
            for name, t in md.topics.items() if not name.startswith("__")}


def test_a_broker_behind_the_log_start_loads_the_snapshot_and_the_controller_restarts_from_one(
        tmp_path: Path) -> None:
    metrics_port = free_port_block(2)
    with LocalCluster(dir=tmp_path / "c", port=free_port_block(3), nodes=2,
                      overrides={**SNAPSHOTS_EVERY_2_KB, "metrics.port": str(metrics_port)}) as cluster:
        b = cluster.bootstrap
        broker1, broker2 = b.split(",")
        for topic in ("kept", "doomed"):
            create_topic(b, topic, partitions=2, replication_factor=2)
        acked = produce_acked(b, "kept", 200, partitions=2)
        assert len(acked) == 200
        wait_until(lambda: all(len(isr) == 2 for _, _, isr in partition_layout(b, "kept").values()), "kept in sync",
                   retry_on=(Exception,))
        assert (cluster.dir / "node-2" / "data" / "doomed-0").is_dir()

        cluster.kill9(2)
        behind = log_end(cluster, 2)
        admin = AdminClient({"bootstrap.servers": broker1})
        admin.delete_topics(["doomed"])["doomed"].result(timeout=30)
        for i in range(30):
            create_topic(broker1, f"churn-{i}", partitions=3)
        admin.delete_topics([f"churn-{i}" for i in range(0, 30, 2)])["churn-0"].result(timeout=30)
        admin.alter_configs([ConfigResource("topic", "churn-1", set_config={"retention.ms": "123456"})])[
            ConfigResource("topic", "churn-1")].result(timeout=30)
        wait_until(lambda: log_start(cluster, CONTROLLER_NODE_ID) > behind,
                   "the controller's log deleted below a snapshot past broker 2's log end")
        assert "Wrote a metadata snapshot at offset" in cluster.log_text(CONTROLLER_NODE_ID)

        had_own_snapshot = bool(snapshot_ends(cluster, 2))
        cluster.start_node(2)
        # the snapshot it started from, if it had written one, and each of the controller's it
        # fetched: at least one, and another if the controller's log start passed the first
        # before this broker fetched past it (on a loaded machine)
        def loads() -> tuple[float, int]:
            fetched = cluster.log_text(2).count("Loaded the controller's metadata snapshot at offset")
            return scrape(metrics_port + 1)["kafka_server_metadataloader_handleloadsnapshotcount"], fetched

        def counted_each() -> bool:
            loaded, fetched = loads()
            return fetched >= 1 and loaded == had_own_snapshot + fetched

        wait_until(counted_each, "broker 2 counts each snapshot it loaded", seen=loads)
        text = cluster.log_text(2)
        assert scrape(metrics_port)["kafka_server_snapshotemitter_latestsnapshotgeneratedbytes"] > 0
        assert "Traceback" not in text
        wait_until(lambda: topics_seen_by(broker2) == topics_seen_by(broker1), "broker 2 knows what broker 1 knows",
                   retry_on=(Exception,))
        seen = topics_seen_by(broker2)
        assert "doomed" not in seen and "churn-1" in seen and "churn-0" not in seen
        # the deletion it only learnt as an absence from the snapshot removed its replicas
        wait_until(lambda: not any((cluster.dir / "node-2" / "data" / f"doomed-{p}").exists() for p in (0, 1)),
                   "broker 2's replicas of the deleted topic gone")
        # it follows again as a replica, and the log after the snapshot reaches it
        wait_until(lambda: all(len(isr) == 2 for _, _, isr in partition_layout(b, "kept").values()),
                   "broker 2 back in the ISR", retry_on=(Exception,))
        create_topic(b, "after", partitions=2, replication_factor=2)
        wait_until(lambda: "after" in topics_seen_by(broker2), "broker 2 sees a topic created after its return",
                   retry_on=(Exception,))
        got = {(m.partition(), m.offset()): m.value() for p in (0, 1)
               for m in consume_partition(broker2, "kept", p, 100)}
        assert got == acked

        # the controller restarts from its latest snapshot and the log after it
        before = topics_seen_by(broker1)
        # a snapshot's file appears a moment before retention deletes the segments below it
        wait_until(lambda: snapshot_ends(cluster, CONTROLLER_NODE_ID)[-1] == log_start(cluster, CONTROLLER_NODE_ID),
                   "the controller's log starting at its latest snapshot",
                   seen=lambda: (snapshot_ends(cluster, CONTROLLER_NODE_ID), log_start(cluster, CONTROLLER_NODE_ID)))
        cluster.kill9(CONTROLLER_NODE_ID)
        cluster.start_node(CONTROLLER_NODE_ID)
        create_topic(b, "after-restart", partitions=1, replication_factor=2)
        wait_until(lambda: set(topics_seen_by(broker1)) == {*before, "after-restart"},
                   "the restarted controller has every topic", retry_on=(Exception,))
        assert {name: parts for name, parts in topics_seen_by(broker1).items() if name in before} == before
        assert "Traceback" not in cluster.log_text(CONTROLLER_NODE_ID)
        # bounded: one snapshot kept, and the log from it
        for node in (CONTROLLER_NODE_ID, 1, 2):
            assert len(snapshot_ends(cluster, node)) <= 2, node
