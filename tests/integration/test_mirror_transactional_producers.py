"""A transactional topic written by real transactional producers at the source, mirrored.

The source is a kmirror cluster with its transaction coordinator: confluent-kafka's,
kafka-python's and aiokafka's transactional producers commit and abort there (markers written by the
coordinator), idempotent records interleave, and one transaction stays open. Proven: the
destination's batches, markers included, and its `.txnindex` are identical to the source's up to
the source LSO and nothing of the open transaction is copied; read_committed consumers of both
clusters see the same records; failover with the source transaction still open leaves no
hanging transaction at the destination (LSO == HW) and a new transactional producer works there.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kmirror.records.batch import iter_batches
from kmirror.records.control import ControlType, read_control_type
from kmirror.testing.kafka_clients import consume_to_end, watermarks
from kmirror.testing.mirror_clusters import (
    create_mirror,
    partition_states,
    wait_mirror_fetch_rounds,
    wait_until,
)
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.segments import log_batches, txn_index_bytes

pytestmark = pytest.mark.integration

TOPIC = "ledger"


@pytest.fixture
def dest_overrides() -> dict[str, str]:
    return {"metrics.port": str(free_port_block())}  # the mirror's Fetch requests, counted


def hw(bootstrap: str) -> int:
    return watermarks(bootstrap, TOPIC, 0, "read_uncommitted")[1]


def lso(bootstrap: str) -> int:
    return watermarks(bootstrap, TOPIC, 0, "read_committed")[1]


def txn_index(cluster: LocalCluster) -> bytes:
    return txn_index_bytes(cluster, TOPIC, 0)


def consume(bootstrap: str, isolation: str) -> list[tuple[int, bytes]]:
    return consume_to_end(bootstrap, TOPIC, isolation)


def test_transactional_producers_mirrored_byte_identical_and_failover_with_an_open_transaction(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    from aiokafka import AIOKafkaProducer
    from kafka import KafkaProducer

    source, dest = clusters
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC,
            "--partitions", "1", "--replication-factor", "1")
    txn = Producer({"bootstrap.servers": source.bootstrap, "transactional.id": "ledger-writer", "linger.ms": 5})
    txn.init_transactions(60)
    plain = Producer({"bootstrap.servers": source.bootstrap, "enable.idempotence": True})

    txn.begin_transaction()
    for i in range(3):
        txn.produce(TOPIC, value=b"commit-a-%d" % i, partition=0)
    txn.flush(30)
    plain.produce(TOPIC, value=b"plain-1", partition=0)
    plain.flush(30)
    txn.commit_transaction(60)
    txn.begin_transaction()
    txn.produce(TOPIC, value=b"abort-1", partition=0)
    txn.produce(TOPIC, value=b"abort-2", partition=0)
    txn.flush(30)
    txn.abort_transaction(60)
    other = KafkaProducer(bootstrap_servers=source.bootstrap, transactional_id="ledger-kafka-python")
    other.init_transactions()
    other.begin_transaction()
    other.send(TOPIC, b"kafka-python-1", partition=0)
    other.commit_transaction()
    other.close()

    async def aiokafka_transaction() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=source.bootstrap, transactional_id="ledger-aiokafka")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(TOPIC, b"aiokafka-1", partition=0)
        finally:
            await producer.stop()

    asyncio.run(aiokafka_transaction())
    txn.begin_transaction()
    txn.produce(TOPIC, value=b"open-1", partition=0)  # stays open: the source LSO stops here
    txn.flush(30)
    plain.produce(TOPIC, value=b"plain-2", partition=0)
    plain.flush(30)

    source_lso = lso(source.bootstrap)
    assert source_lso < hw(source.bootstrap)
    create_mirror(dest, source, "m", TOPIC, tmp_path / "mirror.properties")

    source_below_lso = [(o, raw) for o, raw in log_batches(source, TOPIC, 0) if o < source_lso]
    wait_until(lambda: hw(dest.bootstrap) == source_lso, "the destination HW at the source LSO")
    wait_until(lambda: log_batches(dest, TOPIC, 0) == source_below_lso, "byte-identical destination batches")
    # three more mirror fetches at the source LSO: a mirror copying past it would have
    wait_mirror_fetch_rounds(int(dest.overrides["metrics.port"]), "m")
    assert log_batches(dest, TOPIC, 0) == source_below_lso
    markers = [read_control_type(raw) for _, raw in source_below_lso if next(iter_batches(raw))[1].is_control]
    assert markers == [ControlType.COMMIT, ControlType.ABORT, ControlType.COMMIT, ControlType.COMMIT]
    assert txn_index(dest) == txn_index(source) != b""  # the aborted transaction, indexed on both

    committed = [v for _, v in consume(dest.bootstrap, "read_committed")]
    assert committed == [b"commit-a-0", b"commit-a-1", b"commit-a-2", b"plain-1", b"kafka-python-1", b"aiokafka-1"]
    source_committed = [(o, v) for o, v in consume(source.bootstrap, "read_committed") if o < source_lso]
    assert consume(dest.bootstrap, "read_committed") == source_committed
    assert b"open-1" not in [v for _, v in consume(dest.bootstrap, "read_uncommitted")]

    # failover with the source transaction still open: nothing of it at the destination, no
    # hanging transaction there, and a transactional producer of the destination works
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", ".*")
    wait_until(lambda: set(partition_states(dest.bootstrap, TOPIC).values()) == {"STOPPED"}, "the partition STOPPED")
    assert lso(dest.bootstrap) == hw(dest.bootstrap)
    fresh = Producer({"bootstrap.servers": dest.bootstrap, "transactional.id": "after-failover"})
    fresh.init_transactions(60)
    fresh.begin_transaction()
    fresh.produce(TOPIC, value=b"after-failover", partition=0)
    fresh.commit_transaction(60)
    assert [v for _, v in consume(dest.bootstrap, "read_committed")][-1] == b"after-failover"
    assert lso(dest.bootstrap) == hw(dest.bootstrap)
    assert b"open-1" not in [v for _, v in consume(dest.bootstrap, "read_uncommitted")]
    txn.abort_transaction(60)
