"""The topic config `mirror.support.unclean.leader.election` (KIP-1279, dynamic, default false)
on real processes: a single-node source, a 3-broker destination (RF 3).

With it set on the destination topic, the LME truncation of a topic added back to its mirror
waits for every replica: with one destination follower down (out of the ISR), the partition
stays PREPARING, and `kmirror mirrors --describe --verbose` says it waits for that replica.
Once the follower is back, it truncates and the partition goes MIRRORING, every replica
byte-identical to the source. Without the config, the same add-back goes MIRRORING while the
follower is still down (the ISR suffices)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kmirror.testing.acked_writer import partition_layout
from kmirror.testing.kafka_clients import end_offsets, produce_delivered
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, partition_states, wait_until
from kmirror.testing.processes import (
    FAST_FAILURE_DETECTION,
    LocalCluster,
    free_port_block,
    kmirror,
    kmirror_in_process,
)
from kmirror.testing.segments import log_batches

pytestmark = pytest.mark.integration

TOPIC = "orders"
CONFIG = "mirror.support.unclean.leader.election"


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[tuple[LocalCluster, LocalCluster]]:
    source = LocalCluster(dir=tmp_path / "source", port=free_port_block())
    dest = LocalCluster(dir=tmp_path / "dest", port=free_port_block(3), nodes=3,
                        overrides={**FAST_FAILURE_DETECTION, "default.replication.factor": "3"})
    with clusters_up(source, dest):
        yield source, dest


def reasons(dest: LocalCluster) -> dict[str, str]:
    """Partition 0's state -> its REASON column, from `kmirror mirrors --describe --verbose`."""
    out = kmirror_in_process("mirrors", "--bootstrap-server", dest.bootstrap, "--describe", "--verbose").stdout
    rows = [line.split(maxsplit=7) for line in out.splitlines()[1:] if line.strip()]
    return {row[6]: row[7] for row in rows if row[1] == TOPIC and row[2] == "0"}


def add_back_with_a_follower_down(dest: LocalCluster, follower: int) -> None:
    """Failover (remove), then add the topic back to the mirror while `follower` is down."""
    dest.kill9(follower)
    wait_until(lambda: follower not in partition_layout(dest.bootstrap, TOPIC)[0][2], "the ISR without the follower")
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", TOPIC)
    wait_until(lambda: partition_states(dest.bootstrap, TOPIC) == {0: "STOPPED"}, "the failover")
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", "m", "--topic", TOPIC)


def test_lme_truncation_waits_for_every_replica_only_with_the_topic_config(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC, "--partitions", "1")
    produce_delivered({"bootstrap.servers": source.bootstrap}, TOPIC, [(0, b"k", b"v" * 100) for _ in range(30)])
    create_mirror(dest, source, "m", TOPIC, tmp_path / "mirror.properties")
    wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, 1) == [30], "the first records mirrored")
    leader, replicas, _ = partition_layout(dest.bootstrap, TOPIC)[0]
    follower = next(r for r in replicas if r != leader)

    kmirror("configs", "--bootstrap-server", dest.bootstrap, "--entity-type", "topics", "--entity-name", TOPIC,
            "--alter", "--add-config", f"{CONFIG}=true")
    add_back_with_a_follower_down(dest, follower)
    waiting = f"replicas [{follower}] still truncating ({CONFIG}"
    wait_until(lambda: waiting in reasons(dest).get("PREPARING", ""), "PREPARING waiting for the down follower")
    produce_delivered({"bootstrap.servers": source.bootstrap}, TOPIC, [(0, b"k", b"w" * 100) for _ in range(10)])
    assert partition_states(dest.bootstrap, TOPIC) == {0: "PREPARING"}

    dest.start_node(follower)
    wait_until(lambda: partition_states(dest.bootstrap, TOPIC) == {0: "MIRRORING"}, "MIRRORING once it truncated")
    wait_until(lambda: all(log_batches(dest, TOPIC, 0, node) == log_batches(source, TOPIC, 0) for node in replicas),
               "every destination replica byte-identical to the source")

    # Without the config the ISR is enough: MIRRORING with the follower still down.
    kmirror("configs", "--bootstrap-server", dest.bootstrap, "--entity-type", "topics", "--entity-name", TOPIC,
            "--alter", "--delete-config", CONFIG)
    add_back_with_a_follower_down(dest, follower)
    wait_until(lambda: partition_states(dest.bootstrap, TOPIC) == {0: "MIRRORING"}, "MIRRORING with the ISR")
    assert follower not in partition_layout(dest.bootstrap, TOPIC)[0][2]
    dest.start_node(follower)
