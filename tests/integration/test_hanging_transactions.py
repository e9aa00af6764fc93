"""A hanging transaction found and aborted with `kmirror transactions --find-hanging` and
`--abort` (kafka-transactions.sh, KIP-664) on a real node.

A transactional batch whose producer the transaction coordinator never knew (written into the
stopped node's log, as a coordinator that lost its state would leave it) holds the partition's
last stable offset: read_committed consumers stop there. `--find-hanging` lists it, and not a
live transaction open on the same partition; `--abort --start-offset` writes its ABORT marker,
and the last stable offset moves on to the live transaction, then to the end once that one
commits."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from kmirror.log.config import LogConfig
from kmirror.log.log import Log
from kmirror.runtime.node import SystemClock
from kmirror.runtime.os_fs import OsFileSystem
from kmirror.testing.kafka_clients import create_topic, produce_values, watermarks
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster, kmirror
from kmirror.testing.segments import partition_dir
from kmirror.testing.transactions import TxnWriter
from kmirror.types import TopicPartition

pytestmark = pytest.mark.integration

TOPIC = "hang"
LOST_PID = 900_001


def transactions(node: LocalCluster, *args: str, check: bool = True) -> list[list[str]]:
    result = kmirror("transactions", "--bootstrap-server", node.bootstrap, *args, check=check)
    if not check:
        assert result.returncode == 1, result
        return [[result.stderr.strip()]]
    return [line.split() for line in result.stdout.splitlines()]


def hw(node: LocalCluster) -> int:
    return watermarks(node.bootstrap, TOPIC, 0, "read_uncommitted")[1]


def lso(node: LocalCluster) -> int:
    return watermarks(node.bootstrap, TOPIC, 0, "read_committed")[1]


def test_a_hanging_transaction_is_found_and_aborted(cluster: LocalCluster) -> None:
    create_topic(cluster.bootstrap, TOPIC, 1)
    produce_values({"bootstrap.servers": cluster.bootstrap}, TOPIC, [b"a", b"b"])
    cluster.kill9(1)
    log = Log.open(OsFileSystem(), str(partition_dir(cluster, TOPIC, 0)), TopicPartition(TOPIC, 0), LogConfig(),
                   SystemClock(), recovery_point=0)
    hanging_start = TxnWriter(log).data(LOST_PID, b"lost-1", b"lost-2")
    assert hanging_start == 2
    log.close()
    cluster.start_node(1)
    wait_until(lambda: hw(cluster) == 4, "the cluster serving the log")

    live = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "live"})
    live.init_transactions(30)
    live.begin_transaction()
    live.produce(TOPIC, value=b"live", partition=0)
    assert live.flush(30) == 0  # open at offset 4
    assert lso(cluster) == hanging_start

    # kafka-transactions.sh's form (`find-hanging`) and kmirror's flags (`--find-hanging`) alike
    found = transactions(cluster, "find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0")
    assert found[0] == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                        "LastTimestamp", "Duration(min)"]
    assert [row[:6] for row in found[1:]] == [[TOPIC, "0", str(LOST_PID), "0", "-1", str(hanging_start)]]
    # the default scope: nothing has been idle for 15 minutes
    assert transactions(cluster, "--find-hanging", "--broker-id", "1")[1:] == []

    refused = transactions(cluster, "--abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "3",
                           check=False)
    assert refused == [[f"Error: Could not find any open transactions starting at offset 3 on partition {TOPIC}-0"]]
    assert transactions(cluster, "--find-hanging", check=False) == [[
        "Error: The `find-hanging` command requires either --topic or --broker-id to limit the scope of the search"]]

    assert transactions(cluster, "abort", "--find-hanging", check=False) == [[
        "Error: abort and --find-hanging are two actions: give one"]]
    transactions(cluster, "abort", "--topic", TOPIC, "--partition", "0", "--start-offset", str(hanging_start))
    assert lso(cluster) == 4  # the live transaction's start: it is still open
    assert transactions(cluster, "--find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0")[1:] == []
    live.commit_transaction(30)
    wait_until(lambda: lso(cluster) == hw(cluster), "the last stable offset at the end")
