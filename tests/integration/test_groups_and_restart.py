"""Consumer groups with commits, and `kill -9` + restart keeping every acknowledged record
and committed offset at the same offsets."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as TP
from test_clients import consume_partition, create_topic

pytestmark = pytest.mark.integration


def produce_acked(bootstrap: str, topic: str, n: int, partitions: int, prefix: str = "r") -> dict[tuple[int, int], bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 2})
    acked: dict[tuple[int, int], bytes] = {}

    def on_delivery(err, msg):
        if err is None:
            acked[(msg.partition(), msg.offset())] = msg.value()

    for i in range(n):
        producer.produce(topic, value=f"{prefix}-{i}".encode(), partition=i % partitions, on_delivery=on_delivery)
    producer.flush(30)
    return acked


def group_consume(bootstrap: str, group: str, topic: str, count: int, timeout_s: float = 60) -> list[tuple[int, int, bytes]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": 10000,
        }
    )
    consumer.subscribe([topic])
    out = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        out.append((msg.partition(), msg.offset(), msg.value()))
        consumer.commit(message=msg, asynchronous=False)
    consumer.close()
    return out


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    offsets = consumer.committed([TP(topic, p) for p in range(partitions)], timeout=30)
    consumer.close()
    return {tp.partition: tp.offset for tp in offsets}


def test_group_consumes_commits_and_resumes(cluster):
    create_topic(cluster.bootstrap, "gt", partitions=2)
    acked = produce_acked(cluster.bootstrap, "gt", 40, 2)
    first = group_consume(cluster.bootstrap, "g1", "gt", 25)
    assert len(first) == 25
    offsets = committed(cluster.bootstrap, "g1", "gt", 2)
    for p in range(2):
        seen = [o for (pp, o, _) in first if pp == p]
        assert offsets[p] == (max(seen) + 1 if seen else -1001)
    rest = group_consume(cluster.bootstrap, "g1", "gt", 40 - 25)
    everything = {(p, o): v for (p, o, v) in first + rest}
    assert everything == acked


def test_kill_9_and_restart_keeps_acknowledged_records_and_offsets(cluster):
    create_topic(cluster.bootstrap, "durable", partitions=3)
    acked = produce_acked(cluster.bootstrap, "durable", 600, 3)
    assert len(acked) == 600
    consumed = group_consume(cluster.bootstrap, "dg", "durable", 100)
    before = committed(cluster.bootstrap, "dg", "durable", 3)

    cluster.kill9()
    assert not cluster.serving()
    cluster.up()

    for p in range(3):
        expected = sorted((o, v) for (pp, o), v in acked.items() if pp == p)
        msgs = consume_partition(cluster.bootstrap, "durable", p, len(expected))
        assert [(m.offset(), m.value()) for m in msgs] == expected
    assert committed(cluster.bootstrap, "dg", "durable", 3) == before
    assert len(consumed) == 100
    # the log keeps accepting writes after recovery, at the next offsets
    more = produce_acked(cluster.bootstrap, "durable", 3, 3, prefix="after")
    assert sorted(more) == [(p, 200) for p in range(3)]
