"""A cluster with three controllers (KIP-595 voters) survives the loss of its active controller:
another voter is elected, the cluster keeps creating topics, fencing a dead broker and moving
its leaderships, and the old controller comes back as a follower with the same metadata log;
a mirror's destination fails over while its active controller is dead."""

from __future__ import annotations

from pathlib import Path

import pytest

from kmirror.runtime.local_cluster import CONTROLLER_NODE_ID
from kmirror.testing.acked_writer import AckedWriter, assert_acked_mirrored_once
from kmirror.testing.chaos import REPLICATED_CLUSTER
from kmirror.testing.chaos_checks import (
    PARTITIONS,
    TOPIC,
    TOPICS,
    fail_over,
    set_up,
    voter_logs_agree,
    write_after_failover,
)
from kmirror.testing.kafka_clients import (
    consume_partition,
    create_topic,
    end_offsets,
    produce_acked,
)
from kmirror.testing.kafka_clients import (
    leaders_and_isr_sizes as replicas_of,
)
from kmirror.testing.mirror_clusters import clusters_up, quorum_replication, wait_until
from kmirror.testing.mirror_clusters import quorum_leader as leader
from kmirror.testing.processes import (
    FAST_FAILURE_DETECTION,
    LocalCluster,
    free_port_block,
)

pytestmark = pytest.mark.integration

CONTROLLERS = [CONTROLLER_NODE_ID, CONTROLLER_NODE_ID + 1, CONTROLLER_NODE_ID + 2]


def test_the_cluster_survives_the_loss_of_its_active_controller(tmp_path: Path) -> None:
    port = free_port_block(3)
    with LocalCluster(dir=tmp_path / "c", port=port, nodes=3, controllers=3,
                      overrides=dict(FAST_FAILURE_DETECTION)) as cluster:
        bootstrap = cluster.bootstrap
        first, epoch = wait_until(lambda: leader(bootstrap), "a leader of the metadata quorum",
                                  retry_on=(AssertionError, KeyError, ValueError))
        assert first in CONTROLLERS and epoch >= 1
        replication = quorum_replication(bootstrap)
        assert {n for n, row in replication.items() if row["Status"] == "Follower"} == set(CONTROLLERS) - {first}
        create_topic(bootstrap, "orders", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
        acked = produce_acked(bootstrap, "orders", 300, 3, prefix="before")
        assert len(acked) == 300

        # the active controller dies: another voter is elected in a later epoch and is active
        cluster.kill9(first)
        second, new_epoch = wait_until(lambda: (lambda le: le if le[0] != first else None)(leader(bootstrap)),
                                       "a new leader of the metadata quorum", retry_on=(AssertionError, KeyError,
                                                                                       ValueError))
        assert second in CONTROLLERS and new_epoch > epoch
        log_text = cluster.log_text(second)
        assert f"Controller {second} is the active controller in epoch {new_epoch}" in log_text
        create_topic(bootstrap, "payments", partitions=2, replication_factor=3)
        assert set(replicas_of(bootstrap, "payments")) == {0, 1}

        # a broker dies: the new active controller fences it and moves its leaderships
        led_by_3 = [p for p, (lead, _) in replicas_of(bootstrap, "orders").items() if lead == 3]
        cluster.kill9(3)
        wait_until(lambda: all(lead in (1, 2) and isr == 2 for lead, isr in replicas_of(bootstrap, "orders").values()),
                   "broker 3 fenced and out of every ISR", seen=lambda: replicas_of(bootstrap, "orders"))
        more = produce_acked(f"127.0.0.1:{port},127.0.0.1:{port + 1}", "orders", 150, 3, prefix="after")
        assert len(more) == 150
        for p in led_by_3:
            assert replicas_of(bootstrap, "orders")[p][0] in (1, 2)

        # the old active controller comes back as a follower and catches up
        cluster.start_node(first)
        cluster.start_node(3)
        wait_until(lambda: quorum_replication(bootstrap).get(first, {}).get("Status") == "Follower"
                   and quorum_replication(bootstrap)[first]["Lag"] == "0",
                   "the old controller caught up as a follower", seen=lambda: quorum_replication(bootstrap),
                   retry_on=(AssertionError,))
        assert leader(bootstrap) == (second, new_epoch)
        create_topic(bootstrap, "after-return", partitions=1, replication_factor=3)
        wait_until(lambda: all(isr == 3 for _, isr in replicas_of(bootstrap, "orders").values()),
                   "broker 3 back in every ISR", seen=lambda: replicas_of(bootstrap, "orders"))

        everything = {**acked, **more}
        for p in range(3):
            wanted = {o: v for (q, o), v in everything.items() if q == p}
            read = consume_partition(bootstrap, "orders", p, max(wanted) + 1)
            assert {m.offset(): m.value() for m in read if m.offset() in wanted} == wanted

        # every voter holds the same metadata log, record for record
        ends = {n: int(row["LogEndOffset"]) for n, row in quorum_replication(bootstrap).items() if n in CONTROLLERS}
        assert len(set(ends.values())) == 1, ends
        wait_until(lambda: voter_logs_agree(cluster), "every voter's metadata log alike")


def test_a_destination_fails_over_while_its_active_controller_is_dead(tmp_path: Path) -> None:
    """The DR case: the destination's active controller is lost with the source; another voter
    takes over and the mirror fails over (a controller write: BumpLeaderEpochs), every
    acknowledged source record is at its offset at the destination, which takes writes."""
    source = LocalCluster(dir=tmp_path / "source", port=free_port_block(3), nodes=3, overrides=dict(REPLICATED_CLUSTER))
    dest = LocalCluster(dir=tmp_path / "dest", port=free_port_block(3), nodes=3, controllers=3,
                        overrides={**REPLICATED_CLUSTER, "mirror.metadata.refresh.interval.ms": "1000"})
    with clusters_up(source, dest):
        set_up(source, dest, tmp_path)
        writer = AckedWriter(source.bootstrap, "quorum-dr", TOPIC, PARTITIONS)
        writer.start()
        wait_until(lambda: len(writer.acked) > 300, "records acknowledged at the source")
        writer.finish()
        assert not writer.failed
        assert_acked_mirrored_once(dest.bootstrap, writer)

        active, epoch = wait_until(lambda: leader(dest.bootstrap), "the destination's active controller",
                                   retry_on=(AssertionError, KeyError, ValueError))
        dest.kill9(active)
        ends = {t: end_offsets(dest.bootstrap, t, PARTITIONS) for t in TOPICS}
        fail_over(dest)
        successor, new_epoch = leader(dest.bootstrap)
        assert successor != active and new_epoch > epoch
        assert_acked_mirrored_once(dest.bootstrap, writer)
        write_after_failover(dest, ends)
