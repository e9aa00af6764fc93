"""A destination whose brokers already replicate to each other when `mirror.version` is
enabled (every running cluster): its followers must still replicate mirror partitions whose
source epochs are above the destination's own leader epochs.

A follower bounds the partition leader epochs of the batches it appends by the leader's
`mirror_leader_epoch`, which Fetch v19 carries, and a broker advertises v19 only once the
feature is finalized. A follower connection opened before that keeps v18: without a new
negotiation it refused every source batch above its local leader epoch as corrupt, forever
(found by `kmirror.testing.chaos --disaster partition`: failback to a cluster that enabled
the feature only then). Here both clusters have 3 brokers; the source's leader epoch is
raised by killing the partition leader, and the destination's brokers replicate a topic of
their own before the feature is enabled."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kmirror.testing.acked_writer import partition_layout
from kmirror.testing.chaos import REPLICATED_CLUSTER
from kmirror.testing.chaos_checks import BROKERS, fully_in_sync
from kmirror.testing.kafka_clients import end_offsets, produce_delivered
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.segments import headers, log_batches

pytestmark = pytest.mark.integration

TOPIC = "events"


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[tuple[LocalCluster, LocalCluster]]:
    source = LocalCluster(dir=tmp_path / "source", port=free_port_block(3), nodes=3, overrides=dict(REPLICATED_CLUSTER))
    dest = LocalCluster(dir=tmp_path / "dest", port=free_port_block(3), nodes=3, overrides=dict(REPLICATED_CLUSTER))
    with clusters_up(source, dest):
        yield source, dest


def produce(bootstrap: str, tag: str, count: int = 50) -> None:
    delivered = produce_delivered({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"}, TOPIC,
                                  [(0, f"{tag}-{i}".encode(), b"v" * 200) for i in range(count)])
    assert len(delivered) == count


def test_followers_replicate_source_epochs_above_their_own(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    for cluster, topic in ((source, TOPIC), (dest, "local")):
        kmirror("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", topic, "--partitions", "3",
                "--replication-factor", "3")
        wait_until(lambda c=cluster, t=topic: fully_in_sync(c, (t,)), f"{topic} fully in sync", retry_on=(Exception,))
    produce(source.bootstrap, "first")
    leader = partition_layout(source.bootstrap, TOPIC)[0][0]
    source.kill9(leader)  # a new leader, in a higher leader epoch
    wait_until(lambda: partition_layout(source.bootstrap, TOPIC)[0][0] not in (leader, -1), "a new source leader",
               retry_on=(Exception,))
    produce(source.bootstrap, "second")
    source.start_node(leader)
    wait_until(lambda: fully_in_sync(source, (TOPIC,)), "the source fully in sync again", retry_on=(Exception,))
    source_leader = partition_layout(source.bootstrap, TOPIC)[0][0]
    expected = log_batches(source, TOPIC, 0, source_leader)
    assert max(h.partition_leader_epoch for h in headers(expected)) >= 1

    # The destination's brokers already fetch `local` from each other (Fetch v18) when the
    # feature is enabled and the mirror partition's followers start on those connections.
    create_mirror(dest, source, "m", TOPIC, tmp_path / "mirror.properties")
    wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, 1) == end_offsets(source.bootstrap, TOPIC, 1)
               and fully_in_sync(dest, (TOPIC,)), "every destination replica of the mirror partition in sync",
               retry_on=(Exception,),
               seen=lambda: {n: len(log_batches(dest, TOPIC, 0, n)) for n in BROKERS})
    for node in BROKERS:
        assert log_batches(dest, TOPIC, 0, node) == expected, f"replica on broker {node}"
