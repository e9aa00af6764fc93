"""A node whose storage refuses writes (a full disk; here a file size limit set on the running
process, so its writes fail with EFBIG past it) halts, as Kafka's broker does when its log
directories have failed, and loses no acknowledged record: a replicated partition moves to an
in-sync replica and the producer goes on; a single node, restarted, cuts the torn tail its last
write left and serves every record it acknowledged."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror.records.batch import valid_prefix
from kmirror.runtime.local_cluster import CONTROLLER_NODE_ID
from kmirror.testing.acked_writer import AckedWriter, assert_acked_mirrored_once, partition_layout
from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.mirror_clusters import create_mirror, partition_states, wait_until
from kmirror.testing.processes import FAST_FAILURE_DETECTION, LocalCluster, free_port_block
from kmirror.testing.segments import log_batches

pytestmark = pytest.mark.integration


def assert_halted_as_kafka(cluster: LocalCluster, node_id: int) -> None:
    """Stopped, with Kafka's lines: the failed file and its error, then the shutdown."""
    wait_until(lambda: cluster.exited(node_id), f"node {node_id} halted", timeout_s=60)
    text = cluster.log_text(node_id)
    data_dir = cluster.dir / f"node-{node_id}" / "data"
    assert f"in dir {data_dir}: [Errno 27] File too large" in text
    assert f"Shutdown broker because all log dirs in {data_dir} have failed" in text
    assert "Traceback" not in text


def fill_disk(cluster: LocalCluster, node_id: int) -> None:
    """`LocalCluster.fill_disk` once the broker has loaded its compiled code, so that the limit
    meets only the node's log dirs (it holds for every file the process writes)."""
    wait_until(lambda: all(line in cluster.log_text(node_id) for line in (
        "compiled record walk loaded", "log cleaner's compiled functions loaded")), f"node {node_id} warmed up")
    cluster.fill_disk(node_id)


def create(bootstrap: str, topic: str, replicas: int) -> None:
    config = {"min.insync.replicas": "2"} if replicas > 1 else {}
    create_topic(bootstrap, topic, config=config, replication_factor=replicas)
    wait_until(lambda: all(len(isr) == replicas for _, _, isr in partition_layout(bootstrap, topic).values()),
               f"{topic} in sync", retry_on=(Exception,))


def acks_go_on(writer: AckedWriter, more: int, what: str) -> None:
    wanted = len(writer.acked) + more
    wait_until(lambda: len(writer.acked) >= wanted, f"{more} more acknowledged records {what}", timeout_s=90)


def test_a_leader_whose_disk_fills_halts_and_its_partition_moves_on_with_every_acked_record(tmp_path: Path) -> None:
    with LocalCluster(dir=tmp_path / "c", port=free_port_block(3), nodes=3,
                      overrides=dict(FAST_FAILURE_DETECTION)) as cluster:
        b = cluster.bootstrap
        create(b, "filling", replicas=3)
        writer = AckedWriter(b, "w", "filling", partitions=1)
        writer.start()
        acks_go_on(writer, 200, "before the disk fills")
        leader = partition_layout(b, "filling")[0][0]
        fill_disk(cluster, leader)
        assert_halted_as_kafka(cluster, leader)
        wait_until(lambda: partition_layout(b, "filling")[0][0] not in (-1, leader), "a new leader",
                   retry_on=(Exception,))
        acks_go_on(writer, 200, "on the new leader")
        cluster.start_node(leader)  # no size limit now: it cuts its torn tail and catches up
        wait_until(lambda: leader in partition_layout(b, "filling")[0][2], "the old leader back in the ISR",
                   retry_on=(Exception,))
        writer.finish()
        assert not writer.failed
        assert_acked_mirrored_once(b, writer, every_value_acked=True)
        # the returned replica holds the very batches the others hold
        wait_until(lambda: len({tuple(log_batches(cluster, "filling", 0, n)) for n in (1, 2, 3)}) == 1,
                   "the three replicas' logs identical")


def test_a_controller_whose_disk_fills_halts_and_comes_back_with_a_whole_metadata_log(tmp_path: Path) -> None:
    with LocalCluster(dir=tmp_path / "c", port=free_port_block(3), nodes=3,
                      overrides=dict(FAST_FAILURE_DETECTION)) as cluster:
        b = cluster.bootstrap
        create(b, "before", replicas=3)
        cluster.fill_disk(CONTROLLER_NODE_ID, headroom=1024)
        # 100 PartitionRecords in one batch: more than the 1 KiB the metadata log may still grow
        admin = AdminClient({"bootstrap.servers": b})
        admin.create_topics([NewTopic("big", 100, 3)])
        assert_halted_as_kafka(cluster, CONTROLLER_NODE_ID)
        cluster.start_node(CONTROLLER_NODE_ID)  # space again: the torn batch is cut, nothing of it applied
        assert "Found invalid batches in the metadata log" in cluster.log_text(CONTROLLER_NODE_ID)
        create(b, "after", replicas=3)
        topics = AdminClient({"bootstrap.servers": b}).list_topics(timeout=10).topics
        assert {"before", "after"} <= set(topics)
        # the refused creation is gone, or came back whole (a broker may forward it again)
        assert "big" not in topics or len(topics["big"].partitions) == 100

def test_a_single_node_whose_disk_fills_halts_and_serves_every_acked_record_after_restart(tmp_path: Path) -> None:
    with LocalCluster(dir=tmp_path / "c", port=free_port_block()) as cluster:
        b = cluster.bootstrap
        create(b, "filling", replicas=1)
        writer = AckedWriter(b, "w", "filling", partitions=1)
        writer.start()
        acks_go_on(writer, 200, "before the disk fills")
        fill_disk(cluster, 1)
        assert_halted_as_kafka(cluster, 1)
        writer.stop.set()  # nothing can be acknowledged while the only node is down
        segment = cluster.dir / "node-1" / "data" / "filling-0" / "00000000000000000000.log"
        at_halt = segment.read_bytes()
        whole, _ = valid_prefix(at_halt)
        cluster.start_node(1)
        writer.join(180)
        assert not writer.is_alive()
        assert_acked_mirrored_once(b, writer)
        assert segment.read_bytes()[:whole] == at_halt[:whole]  # every whole batch kept where it was
        if whole < len(at_halt):  # the refused write had begun: recovery cut it and said so
            assert (f"Found invalid batches in log segment {segment}: {len(at_halt) - whole} bytes truncated"
                    in cluster.log_text(1))


def test_a_destination_whose_disk_fills_halts_and_its_mirror_resumes_byte_identical(
        clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path) -> None:
    source, dest = clusters
    create(source.bootstrap, "orders", replicas=1)
    writer = AckedWriter(source.bootstrap, "w", "orders", partitions=1)
    writer.start()
    acks_go_on(writer, 200, "at the source")
    create_mirror(dest, source, "dr", "orders", tmp_path / "mirror.properties")
    wait_until(lambda: partition_states(dest.bootstrap, "orders") == {0: "MIRRORING"}, "the partition mirroring")
    fill_disk(dest, 1)  # the mirror's appends are what fill it
    assert_halted_as_kafka(dest, 1)
    acks_go_on(writer, 200, "at the source while the destination is down")
    dest.start_node(1)  # space again: it cuts the torn batch and mirrors on from its log end
    writer.finish()
    assert not writer.failed
    wait_until(lambda: (lambda d: d and d == log_batches(source, "orders", 0))(log_batches(dest, "orders", 0)),
               "every batch of the source at the destination, byte for byte at the same offsets")
    assert partition_states(dest.bootstrap, "orders") == {0: "MIRRORING"}
