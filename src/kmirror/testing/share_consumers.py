"""Helpers of the share group tests: a group's `share.auto.offset.reset`, acknowledged
produce, confluent-kafka share consumers and polling them until records arrive."""

from __future__ import annotations

import time
from collections import Counter

from confluent_kafka import Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType


def earliest(bootstrap: str, group: str) -> None:
    """`share.auto.offset.reset=earliest` for the group (Kafka's default is latest)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)


def produce(bootstrap: str, topic: str, n: int, partitions: int, codec: str = "lz4") -> set[tuple[int, int]]:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5})
    delivered: set[tuple[int, int]] = set()

    def on_delivery(err, msg) -> None:
        assert err is None, err
        delivered.add((msg.partition(), msg.offset()))

    for i in range(n):
        producer.produce(topic, value=b"v%d" % i, key=b"k%d" % i, partition=i % partitions, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    return delivered


def share_consumer(bootstrap: str, group: str, topic: str, **extra: str) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **extra})
    consumer.subscribe([topic])
    return consumer


def poll_until(consumers: list[ShareConsumer], seen: Counter[tuple[int, int]], want: int,
               timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while len(seen) < want and time.monotonic() < deadline:
        for consumer in consumers:
            for message in consumer.poll(0.5):
                assert message.error() is None, message.error()
                seen[(int(message.partition() or 0), int(message.offset() or 0))] += 1
    assert len(seen) >= want, f"{len(seen)} of {want} records delivered"
