"""Mirrored transactional topics between two 3-broker clusters (RF=3, min.insync.replicas=2).

At the source, confluent-kafka's transactional producer commits and aborts transactions that
span the topic's three partitions (markers written by the source's coordinator to each
partition leader), idempotent records interleave, and one transaction stays open on every
partition. Proven: each destination replica (leader and both followers) holds the source
leader's batches, markers included, up to the source LSO; read_committed output is equal on
both clusters; after failover with the source transaction still open, every destination
partition has LSO == HW, nothing of the open transaction is there, and a new transactional
producer commits at the destination.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kmirror.records.batch import iter_batches
from kmirror.testing.acked_writer import partition_layout
from kmirror.testing.chaos import clusters_in
from kmirror.testing.kafka_clients import consume_to_end, watermarks
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, partition_states, wait_until
from kmirror.testing.processes import LocalCluster, kmirror
from kmirror.testing.segments import log_batches

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "ledger"
PARTITIONS = 3
BROKERS = (1, 2, 3)


@pytest.fixture
def clusters3(tmp_path: Path) -> Iterator[tuple[LocalCluster, LocalCluster]]:
    source, dest = clusters_in(tmp_path)  # 3 brokers, RF 3, fast failure detection
    with clusters_up(source, dest):
        yield source, dest


def hw(bootstrap: str, p: int) -> int:
    return watermarks(bootstrap, TOPIC, p, "read_uncommitted")[1]


def lso(bootstrap: str, p: int) -> int:
    return watermarks(bootstrap, TOPIC, p, "read_committed")[1]


def committed_values(bootstrap: str) -> dict[int, list[bytes]]:
    return {p: [v for _, v in consume_to_end(bootstrap, TOPIC, "read_committed", partition=p)]
            for p in range(PARTITIONS)}


def transaction(producer: Producer, tag: str) -> None:
    producer.begin_transaction()
    for p in range(PARTITIONS):
        producer.produce(TOPIC, value=f"{tag}-{p}".encode(), partition=p)
    producer.flush(30)


def test_transactions_mirrored_to_every_replica_and_failover_with_an_open_transaction(
    clusters3: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters3
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC, "--partitions",
            str(PARTITIONS), "--replication-factor", "3", "--config", "min.insync.replicas=2")
    txn = Producer({"bootstrap.servers": source.bootstrap, "transactional.id": "ledger-3", "linger.ms": 5})
    txn.init_transactions(60)
    plain = Producer({"bootstrap.servers": source.bootstrap, "enable.idempotence": True})
    transaction(txn, "commit-1")
    for p in range(PARTITIONS):
        plain.produce(TOPIC, value=f"plain-{p}".encode(), partition=p)
    plain.flush(30)
    txn.commit_transaction(60)
    transaction(txn, "abort-1")
    txn.abort_transaction(60)
    transaction(txn, "commit-2")
    txn.commit_transaction(60)
    transaction(txn, "open")  # stays open: every source partition's LSO stops before it

    source_lso = [lso(source.bootstrap, p) for p in range(PARTITIONS)]
    assert all(lso_p < hw(source.bootstrap, p) for p, lso_p in enumerate(source_lso))
    create_mirror(dest, source, "m", TOPIC, tmp_path / "mirror.properties")

    for p in range(PARTITIONS):
        leader = partition_layout(source.bootstrap, TOPIC)[p][0]
        expected = [(o, raw) for o, raw in log_batches(source, TOPIC, p, leader) if o < source_lso[p]]
        assert sum(1 for _, raw in expected if next(iter_batches(raw))[1].is_control) == 3  # 2 commits, 1 abort
        wait_until(lambda p=p, e=expected: all(log_batches(dest, TOPIC, p, n) == e for n in BROKERS),
                   f"partition {p}: every destination replica byte-identical below the source LSO",
                   retry_on=(Exception,))
    assert committed_values(dest.bootstrap) == {
        p: [f"commit-1-{p}".encode(), f"plain-{p}".encode(), f"commit-2-{p}".encode()] for p in range(PARTITIONS)}
    source_committed = committed_values(source.bootstrap)
    assert committed_values(dest.bootstrap) == source_committed

    # failover with the source transaction open on every partition
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", ".*")
    wait_until(lambda: set(partition_states(dest.bootstrap, TOPIC).values()) == {"STOPPED"}, "partitions STOPPED",
               retry_on=(Exception,))
    assert all(lso(dest.bootstrap, p) == hw(dest.bootstrap, p) for p in range(PARTITIONS))
    fresh = Producer({"bootstrap.servers": dest.bootstrap, "transactional.id": "after-failover"})
    fresh.init_transactions(60)
    transaction(fresh, "after-failover")
    fresh.commit_transaction(60)
    at_dest = committed_values(dest.bootstrap)
    assert at_dest == {p: [*source_committed[p], f"after-failover-{p}".encode()] for p in range(PARTITIONS)}
    assert all(lso(dest.bootstrap, p) == hw(dest.bootstrap, p) for p in range(PARTITIONS))
    uncommitted = {v for p in range(PARTITIONS)
                   for _, v in consume_to_end(dest.bootstrap, TOPIC, "read_uncommitted", partition=p)}
    assert not any(v.startswith(b"open-") for v in uncommitted)
    txn.abort_transaction(60)
