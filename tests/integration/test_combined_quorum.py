"""Kafka's combined mode with a quorum: three nodes, each a broker and a voter of the metadata
quorum (`kmirror cluster up --combined`). The node that is the active controller, and a broker
leading partitions, is killed -9 under an acks=all producer: another voter is active in a later
epoch, the cluster creates a topic and moves the dead node's leaderships, and the node comes back
as a follower and into every ISR. Nothing acknowledged is lost; the voters' logs agree; the
cluster stops cleanly, the last voters too."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kmirror.testing.acked_writer import AckedWriter, assert_acked_mirrored_once
from kmirror.testing.chaos_checks import voter_logs_agree
from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.kafka_clients import leaders_and_isr_sizes as replicas_of
from kmirror.testing.metrics_scrape import metric_value, scrape
from kmirror.testing.mirror_clusters import quorum_leader as leader
from kmirror.testing.mirror_clusters import quorum_replication, wait_until
from kmirror.testing.processes import FAST_FAILURE_DETECTION, LocalCluster, free_port_block

pytestmark = pytest.mark.integration

NODES = (1, 2, 3)
ACTIVE_CONTROLLERS = "kafka_controller_kafkacontroller_activecontrollercount"


def active_controller_counts(metrics_port: int) -> dict[int, float | None]:
    """ActiveControllerCount of each running node (node i serves metrics on `metrics_port + i - 1`)."""
    return {n: metric_value(metrics_port + n - 1, ACTIVE_CONTROLLERS) for n in NODES}


def test_combined_voters_survive_the_loss_of_the_active_controller(tmp_path: Path) -> None:
    port, metrics_port = free_port_block(3), free_port_block(3)
    cluster = LocalCluster(dir=tmp_path / "c", port=port, nodes=3, combined=True,
                           overrides={**FAST_FAILURE_DETECTION, "metrics.port": str(metrics_port)})
    with cluster:
        bootstrap = cluster.bootstrap
        first, epoch = wait_until(lambda: leader(bootstrap), "a leader of the metadata quorum",
                                  retry_on=(AssertionError, KeyError, ValueError))
        assert first in NODES and epoch >= 1
        rows = quorum_replication(bootstrap)
        assert {n: row["Status"] for n, row in rows.items()} == {n: "Leader" if n == first else "Follower" for n in NODES}
        assert active_controller_counts(metrics_port) == {n: 1.0 if n == first else 0.0 for n in NODES}
        for n in NODES:  # the broker role keeps its replica of the metadata log apart from the voter's
            assert (tmp_path / "c" / f"node-{n}" / "data" / "__cluster_metadata-broker").is_dir()
        create_topic(bootstrap, "orders", partitions=3, replication_factor=3, config={"min.insync.replicas": "2"})
        assert {lead for lead, _ in replicas_of(bootstrap, "orders").values()} == set(NODES)
        writer = AckedWriter(bootstrap, "combined", "orders", 3)
        writer.start()
        wait_until(lambda: len(writer.acked) > 200, "records acknowledged before the kill")

        # the active controller, a broker leading one partition of "orders", dies
        cluster.kill9(first)
        killed_at = time.monotonic()
        second, new_epoch = wait_until(lambda: (lambda le: le if le[0] != first else None)(leader(bootstrap)),
                                       "a new leader of the metadata quorum",
                                       retry_on=(AssertionError, KeyError, ValueError))
        assert second in NODES and new_epoch > epoch
        assert f"Controller {second} is the active controller in epoch {new_epoch}" in cluster.log_text(second)
        survivors = [n for n in NODES if n != first]
        wait_until(lambda: all(lead in survivors and isr == 2 for lead, isr in replicas_of(bootstrap, "orders").values()),
                   f"node {first} fenced and out of every ISR", seen=lambda: replicas_of(bootstrap, "orders"))
        moved_after_s = time.monotonic() - killed_at
        create_topic(bootstrap, "payments", partitions=2, replication_factor=2)  # two brokers are left
        assert {lead for lead, _ in replicas_of(bootstrap, "payments").values()} <= set(survivors)
        acked_before_return = len(writer.acked)
        wait_until(lambda: len(writer.acked) > acked_before_return + 200, "records acknowledged by two brokers")

        # the node comes back: a follower of the new leader, and in every ISR again
        cluster.start_node(first)
        wait_until(lambda: quorum_replication(bootstrap).get(first, {}).get("Status") == "Follower"
                   and quorum_replication(bootstrap)[first]["Lag"] == "0",
                   f"node {first} caught up as a follower", seen=lambda: quorum_replication(bootstrap),
                   retry_on=(AssertionError,))
        wait_until(lambda: all(isr == 3 for _, isr in replicas_of(bootstrap, "orders").values()),
                   f"node {first} back in every ISR", seen=lambda: replicas_of(bootstrap, "orders"))
        assert leader(bootstrap) == (second, new_epoch)
        # its replica fetchers' connections, one per leader it follows (Kafka's replica-fetcher-metrics)
        followed = {lead for lead, _ in replicas_of(bootstrap, "orders").values()} - {first}
        samples = scrape(metrics_port + first - 1)
        for lead in followed:
            tags = f'{{broker_id="{lead}",fetcher_id="0"}}'
            assert samples[f"kafka_server_replica_fetcher_metrics_connection_count{tags}"] == 1, lead
            assert samples[f"kafka_server_replica_fetcher_metrics_response_total{tags}"] >= 1
            assert samples[f"kafka_server_replica_fetcher_metrics_incoming_byte_total{tags}"] > 0
        wait_until(lambda: sum(v or 0 for v in active_controller_counts(metrics_port).values()) == 1,
                   "one active controller in the metrics", seen=lambda: active_controller_counts(metrics_port))
        writer.finish()
        assert not writer.failed, writer.failed[:3]
        assert_acked_mirrored_once(bootstrap, writer)
        wait_until(lambda: voter_logs_agree(cluster), "every voter's metadata log alike")
        print(f"leaderships moved {moved_after_s:.1f} s after the kill of the active controller; "
              f"{len(writer.acked)} records acknowledged")

    # `down` stopped the three voters together: each one's controlled shutdown was granted
    for n in NODES:
        text = cluster.log_text(n)
        assert text.rstrip().endswith(f"node {n} stopped"), text[-500:]
        assert "no controller completed its controlled shutdown" not in text
