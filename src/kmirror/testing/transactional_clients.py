"""Transactions on a real cluster through confluent-kafka: the cluster, topics, a
transactional producer, and reads under either isolation level
(tests/integration/test_transactions*.py)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror.client.connection import BrokerConnection
from kmirror.protocol.entities import build
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.kafka_clients import watermarks
from kmirror.testing.processes import FAST_FAILURE_DETECTION, LocalCluster, free_port_block
from kmirror.testing.replication import request_type

TXN_OVERRIDES = {
    **FAST_FAILURE_DETECTION,
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "5",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "transaction.max.timeout.ms": "120000",
}


@contextmanager
def transactional_cluster(directory: Path) -> Iterator[LocalCluster]:
    """A 3-broker cluster (RF=3) whose transaction and offsets topics are replicated 3 ways,
    with short session and transaction-cleanup intervals, torn down on exit."""
    c = LocalCluster(dir=directory, port=free_port_block(3), nodes=3, overrides=dict(TXN_OVERRIDES))
    c.up()
    try:
        yield c
    finally:
        c.down()


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=3,
                                            config={"min.insync.replicas": "2"})])
    futures[name].result(timeout=30)
    return name


def txn_producer(bootstrap: str, txn_id: str, **extra: Any) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **extra})
    producer.init_transactions(60)
    return producer


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every value a consumer of `isolation` delivers, reading each partition to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4()}",
                         "isolation.level": isolation, "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{isolation} consumer did not reach the end: {values}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error, partition = msg.error(), msg.partition()
            assert partition is not None
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(partition)
                continue
            at_end.discard(partition)
            value = msg.value()
            assert value is not None
            values.append(value)
        return values
    finally:
        consumer.close()


def hw(bootstrap: str, topic: str, partition: int) -> int:
    return watermarks(bootstrap, topic, partition, "read_uncommitted")[1]


def lso(bootstrap: str, topic: str, partition: int) -> int:
    return watermarks(bootstrap, topic, partition, "read_committed")[1]


def request(api_key: int, version: int, **fields: Any) -> Any:
    """A request entity of `api_key` at `version`, for raw requests to the cluster."""
    return build(request_type(api_key, version), **fields)


async def coordinator_connection(cluster: LocalCluster, txn_id: str) -> BrokerConnection:
    """A connection to `txn_id`'s transaction coordinator (FindCoordinator, retried while
    the coordinator loads)."""
    conn = BrokerConnection("127.0.0.1", cluster.port, client_id="txn-bad-input")
    await conn.connect()
    try:
        for _ in range(100):
            found = await conn.send(request(10, 3, key=txn_id, key_type=1))
            if found.error_code == ErrorCode.none:
                break
            await asyncio.sleep(0.2)
        assert found.error_code == ErrorCode.none, found
    finally:
        await conn.close()
    coordinator = BrokerConnection(found.host, found.port, client_id="txn-bad-input")
    await coordinator.connect()
    return coordinator
