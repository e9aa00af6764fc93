"""Producer id expiration (KIP-854, `producer.id.expiration.ms`) on a real node: set as a
dynamic cluster-wide broker config with the CLI, it removes an idle idempotent producer from
the partition's state (DescribeProducers, asked by kafka-python's admin client and by
`kmirror transactions --describe-producers`) but keeps a
producer whose transaction is open; the expired producer's next batch is accepted as a new
producer's, and after a restart the stored dynamic value still applies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTP

from kmirror.testing.kafka_clients import create_topic, idempotent_and_open_transaction, watermarks
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration

TP = KTP("pids", 0)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(dir=tmp_path / "cluster", port=free_port_block(),
                      overrides={"producer.id.expiration.check.interval.ms": "200"}) as c:
        yield c


def producers(admin: KafkaAdminClient) -> dict[int, tuple[int, int]]:
    """producer id -> (last sequence, open transaction's first offset or -1)."""
    state = admin.describe_producers([TP])[TP]
    return {p.producer_id: (p.last_sequence, p.current_transaction_start_offset) for p in state.active_producers}


def test_an_idle_producer_expires_and_a_producer_with_an_open_transaction_stays(node: LocalCluster) -> None:
    b = node.bootstrap
    create_topic(b, "pids", 1)
    idle, txn = idempotent_and_open_transaction(b, "pids", "stays-open", 1)

    admin = KafkaAdminClient(bootstrap_servers=b)
    try:
        before = producers(admin)
        assert sorted(before.values()) == [(0, 5), (4, -1)]  # the default (1 day) expires nothing
        idle_pid = next(pid for pid, (_, start) in before.items() if start == -1)
        txn_pid = next(pid for pid in before if pid != idle_pid)

        kmirror("configs", "--bootstrap-server", b, "--entity-type", "brokers", "--entity-default",
                "--alter", "--add-config", "producer.id.expiration.ms=1500")
        wait_until(lambda: idle_pid not in producers(admin), timeout_s=20,
                   what="the idle producer to expire")
        assert producers(admin) == {txn_pid: (0, 5)}  # an open transaction never expires
        table = kmirror("transactions", "--bootstrap-server", b, "--describe-producers",
                        "--topic", "pids", "--partition", "0").stdout.splitlines()
        assert table[0].split() == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                                    "LastTimestamp", "CurrentTransactionStartOffset"]
        assert [row.split()[:4] + row.split()[5:] for row in table[1:]] == [[str(txn_pid), "0", "-1", "0", "5"]]
        missing = kmirror("transactions", "--bootstrap-server", b, "--describe-producers",
                          "--topic", "pids", "--partition", "3", check=False)
        assert missing.returncode == 1 and missing.stderr.strip() == "Error: pids-3: UNKNOWN_TOPIC_OR_PARTITION"

        # The expired producer goes on with sequence 5: with no state left for it, the
        # partition takes it as a new producer's first batch (KIP-360), not OUT_OF_ORDER.
        idle.produce("pids", value=b"5", partition=0)
        assert idle.flush(30) == 0
        assert producers(admin)[idle_pid] == (5, -1)
        txn.abort_transaction(30)
    finally:
        admin.close()

    node.down()
    node.up()
    assert watermarks(node.bootstrap, "pids", 0)[1] == 8  # 5 + 1 + 1 + the abort marker
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        # both producers are idle now, and the stored dynamic value expires them after the load
        wait_until(lambda: producers(admin) == {}, timeout_s=20, what="the loaded producers to expire")
    finally:
        admin.close()
