"""Transactions left open on a topic that becomes a mirror topic again (failback).

Cluster A is the source, B mirrors it. Two transactional producers of A leave a transaction open
on the topic; B fails over (its log is truncated to the LSO, so nothing of them is there) and is
written to; then A fails back: a mirror on A pointing at B, so A's topic is a read-only mirror
topic whose log is truncated to what B holds. A's transaction coordinator still owes those two
transactions a marker on the topic: one is committed by its producer, the other aborted by the
coordinator when `transaction.timeout.ms` passes. Proven: no marker is written into A's mirror
partition (A stays byte-identical to B at every offset and keeps mirroring), both transactions
complete on A's coordinator, and A's LSO equals its HW.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kmirror.kip1279.errors import MirrorError
from kmirror.testing.kafka_clients import produce_delivered, produce_refused, watermarks
from kmirror.testing.mirror_clusters import create_mirror, partition_states, wait_until
from kmirror.testing.processes import LocalCluster, kmirror
from kmirror.testing.segments import log_batches

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "orders"
MIRROR = "dr"
# The transaction aborted by A's coordinator must still be open once A is a mirror again:
# failover plus failback take well under this on a loaded machine, and the test checks it.
TIMED_OUT_TXN_MS = 30_000


@pytest.fixture
def source_overrides() -> dict[str, str]:
    return {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000"}


def hw(bootstrap: str) -> int:
    return watermarks(bootstrap, TOPIC, 0, "read_uncommitted")[1]


def lso(bootstrap: str) -> int:
    return watermarks(bootstrap, TOPIC, 0, "read_committed")[1]


def produce(bootstrap: str, tag: str, count: int) -> None:
    produce_delivered({"bootstrap.servers": bootstrap, "enable.idempotence": True}, TOPIC,
                      [(0, None, f"{tag}-{i}".encode()) for i in range(count)])


def txn_state(cluster: LocalCluster, txn_id: str) -> str:
    out = kmirror("transactions", "--bootstrap-server", cluster.bootstrap, "--describe",
                  "--transactional-id", txn_id).stdout
    header, values = (line.split() for line in out.splitlines())
    return values[header.index("TransactionState")]  # TopicPartitions, last, may be empty


def open_transaction(bootstrap: str, txn_id: str, tag: str, timeout_ms: int) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5,
                         "transaction.timeout.ms": timeout_ms})
    producer.init_transactions(60)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(TOPIC, value=f"{tag}-{i}".encode(), partition=0)
    producer.flush(30)
    return producer


def identical(a: LocalCluster, b: LocalCluster) -> bool:
    return log_batches(a, TOPIC, 0) == log_batches(b, TOPIC, 0)


def test_transactions_open_when_the_topic_becomes_a_mirror_again_write_no_marker_into_it(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    a, b = clusters
    kmirror("topics", "--bootstrap-server", a.bootstrap, "--create", "--topic", TOPIC,
            "--partitions", "1", "--replication-factor", "1")
    committed = open_transaction(a.bootstrap, "before", "before", 60_000)
    committed.commit_transaction(60)
    create_mirror(b, a, MIRROR, TOPIC, tmp_path / "b-mirror.properties")
    wait_until(lambda: identical(b, a) and hw(b.bootstrap) == hw(a.bootstrap), "B to mirror A")

    # two transactions open at A; B's failover truncates to A's LSO, before both
    to_commit = open_transaction(a.bootstrap, "commits-after-failback", "late-commit", 60_000)
    timed_out = open_transaction(a.bootstrap, "times-out-after-failback", "late-abort", TIMED_OUT_TXN_MS)
    opened_at = time.monotonic()
    assert lso(a.bootstrap) < hw(a.bootstrap)
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--remove", "--topic", ".*")
    wait_until(lambda: set(partition_states(b.bootstrap, TOPIC).values()) == {"STOPPED"}, "B's partition STOPPED")
    produce(b.bootstrap, "at-b", 5)

    # failback: A's topic is a mirror topic again, its log B's
    create_mirror(a, b, MIRROR, TOPIC, tmp_path / "a-mirror.properties")
    wait_until(lambda: set(partition_states(a.bootstrap, TOPIC).values()) == {"MIRRORING"} and identical(a, b),
               "A to mirror B byte for byte")
    assert time.monotonic() - opened_at < TIMED_OUT_TXN_MS / 1000 - 5, "failback too slow for this test"
    assert txn_state(a, "commits-after-failback") == txn_state(a, "times-out-after-failback") == "Ongoing"
    assert produce_refused(a.bootstrap, TOPIC) == MirrorError.READ_ONLY_TOPIC

    # the commit is answered once PrepareCommit is persisted; its marker is never written into
    # the mirror partition, and the timed-out transaction's abort marker neither
    to_commit.commit_transaction(60)
    wait_until(lambda: txn_state(a, "commits-after-failback") == "CompleteCommit", "the commit to complete on A")
    wait_until(lambda: txn_state(a, "times-out-after-failback") == "CompleteAbort",
               "A's coordinator to abort the timed-out transaction", timeout_s=TIMED_OUT_TXN_MS / 1000 + 60)
    assert identical(a, b)
    assert lso(a.bootstrap) == hw(a.bootstrap) == hw(b.bootstrap)

    # A keeps mirroring B byte for byte
    produce(b.bootstrap, "at-b-later", 5)
    wait_until(lambda: identical(a, b) and hw(a.bootstrap) == hw(b.bootstrap), "A to copy B's new records")
    assert lso(a.bootstrap) == hw(a.bootstrap)
    del timed_out  # fenced by A's coordinator; nothing more to do with it
