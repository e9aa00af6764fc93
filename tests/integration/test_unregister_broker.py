"""`kmirror cluster unregister | list-endpoints | cluster-id` (kafka-cluster.sh) on a real
3-broker cluster: a broker that is gone is unregistered (its registration removed, not just
fenced), an unknown id is refused with Kafka's error, and the broker registers anew if it
ever starts again."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from kmirror.testing.acked_writer import partition_layout
from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import FAST_FAILURE_DETECTION, LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration


def endpoints(bootstrap: str, *extra: str) -> dict[int, str]:
    """Broker id -> STATE, from `list-endpoints`."""
    header, *rows = kmirror("cluster", "list-endpoints", "--bootstrap-server", bootstrap, *extra).stdout.splitlines()
    assert header.split() == ["ID", "HOST", "PORT", "RACK", "STATE", "ENDPOINT_TYPE"]
    return {int(row.split()[0]): row.split()[4] for row in rows}


def test_a_gone_broker_is_unregistered_and_registers_anew_if_it_returns(tmp_path: Path) -> None:
    with LocalCluster(dir=tmp_path / "c", port=free_port_block(3), nodes=3,
                      overrides=dict(FAST_FAILURE_DETECTION)) as cluster:
        b = cluster.bootstrap
        broker1 = b.split(",")[0]
        cluster_id = AdminClient({"bootstrap.servers": b}).list_topics(timeout=10).cluster_id
        assert kmirror("cluster", "cluster-id", "--bootstrap-server", b).stdout == f"Cluster ID: {cluster_id}\n"
        create_topic(b, "kept", partitions=3, replication_factor=3)
        assert endpoints(b) == {1: "unfenced", 2: "unfenced", 3: "unfenced"}

        running = kmirror("cluster", "unregister", "--bootstrap-server", b, "--id", "2", check=False)
        assert running.returncode == 1 and "INVALID_REQUEST" in running.stderr and \
            "Broker 2 is unfenced (running)" in running.stderr
        cluster.kill9(3)
        wait_until(lambda: endpoints(broker1, "--include-fenced-brokers") == {1: "unfenced", 2: "unfenced",
                                                                              3: "fenced"}, "broker 3 fenced")
        assert endpoints(broker1) == {1: "unfenced", 2: "unfenced"}
        out = kmirror("cluster", "unregister", "--bootstrap-server", broker1, "--id", "3").stdout
        assert out == "Broker 3 is no longer registered.\n"
        assert endpoints(broker1, "--include-fenced-brokers") == {1: "unfenced", 2: "unfenced"}
        assert "unregistered broker 3" in cluster.log_text(3000)
        # its replicas stay assigned until moved; it leads nothing and is in no ISR
        for leader, replicas, isr in partition_layout(broker1, "kept").values():
            assert 3 in replicas and 3 not in isr and leader in (1, 2)

        refused = kmirror("cluster", "unregister", "--bootstrap-server", broker1, "--id", "3", check=False)
        assert refused.returncode == 1
        assert "BROKER_ID_NOT_REGISTERED" in refused.stderr and "Broker ID 3 is not currently registered" in \
            refused.stderr

        cluster.start_node(3)
        wait_until(lambda: endpoints(broker1) == {1: "unfenced", 2: "unfenced", 3: "unfenced"},
                   "broker 3 registered again")
        wait_until(lambda: all(3 in isr for _, _, isr in partition_layout(broker1, "kept").values()),
                   "broker 3 back in every ISR", retry_on=(Exception,))
