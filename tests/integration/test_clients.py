"""Real Kafka clients against a real kmirror node: topics, produce (every compression, keys,
headers, idempotence) and consume by partition, with offsets checked record by record."""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from kmirror.testing.kafka_clients import consume_partition, create_topic
from kmirror.testing.processes import LocalCluster

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(module_node: LocalCluster) -> LocalCluster:
    """The module's tests share one node: each uses its own topics, groups and configs."""
    return module_node

COMPRESSIONS = ["none", "gzip", "snappy", "lz4", "zstd"]


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_confluent_kafka_idempotent_produce_and_consume(cluster, compression):
    topic = f"t-{compression}"
    create_topic(cluster.bootstrap, topic, partitions=3)
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "compression.type": compression,
            "linger.ms": 5,
        }
    )
    delivered: dict[tuple[int, int], tuple[bytes, bytes]] = {}

    def on_delivery(err, msg):
        assert err is None, err
        delivered[(msg.partition(), msg.offset())] = (msg.key(), msg.value())

    for i in range(300):
        producer.produce(
            topic,
            key=f"k{i}".encode(),
            value=f"value-{i}-".encode() * 5,
            partition=i % 3,
            headers=[("h", f"{i}".encode()), ("null", None)],
            on_delivery=on_delivery,
        )
    assert producer.flush(30) == 0
    assert len(delivered) == 300
    for p in range(3):
        msgs = consume_partition(cluster.bootstrap, topic, p, 100)
        assert [m.offset() for m in msgs] == list(range(100))
        for m in msgs:
            assert delivered[(p, m.offset())] == (m.key(), m.value())
            i = int(m.key()[1:])
            assert m.headers() == [("h", f"{i}".encode()), ("null", None)]


def test_kafka_python_produce_and_consume(cluster):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTP

    create_topic(cluster.bootstrap, "kp", partitions=2)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, compression_type="gzip", acks=1)
    sent = [producer.send("kp", key=b"k%d" % i, value=b"v%d" % i, partition=i % 2).get(timeout=30) for i in range(50)]
    producer.close()
    assert sorted((m.partition, m.offset) for m in sent) == sorted((i % 2, i // 2) for i in range(50))
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, consumer_timeout_ms=30_000, auto_offset_reset="earliest")
    partitions = [KTP("kp", 0), KTP("kp", 1)]
    consumer.assign(partitions)
    ends = consumer.end_offsets(partitions)
    got = {}
    for m in consumer:  # until the position of each partition is its end offset: nothing more to read
        got[(m.partition, m.offset)] = (m.key, m.value)
        if all(consumer.position(tp) >= end for tp, end in ends.items()):
            break
    consumer.close()
    assert got == {(i % 2, i // 2): (b"k%d" % i, b"v%d" % i) for i in range(50)}


def test_aiokafka_produce_and_consume(cluster):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as ATP

    async def main():
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, compression_type="lz4")
        await producer.start()
        try:
            metas = [await producer.send_and_wait("ak", b"v%d" % i, key=b"k", partition=0) for i in range(20)]
        finally:
            await producer.stop()
        assert [m.offset for m in metas] == list(range(20))
        consumer = AIOKafkaConsumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([ATP("ak", 0)])
            out = []
            while len(out) < 20:
                batch = await consumer.getmany(timeout_ms=2000)
                for msgs in batch.values():
                    out += msgs
        finally:
            await consumer.stop()
        assert [(m.offset, m.value) for m in out] == [(i, b"v%d" % i) for i in range(20)]

    create_topic(cluster.bootstrap, "ak")
    asyncio.run(main())


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed")
def test_kcat_produce_and_consume(cluster):
    create_topic(cluster.bootstrap, "kc")
    lines = "".join(f"key{i}:line {i}\n" for i in range(25))
    subprocess.run(
        ["kcat", "-b", cluster.bootstrap, "-P", "-t", "kc", "-p", "0", "-K", ":", "-z", "snappy"],
        input=lines, text=True, check=True, timeout=60,
    )
    out = subprocess.run(
        ["kcat", "-b", cluster.bootstrap, "-C", "-t", "kc", "-p", "0", "-o", "beginning", "-e", "-f", "%o %k %s\\n"],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout
    assert out.splitlines() == [f"{i} key{i} line {i}" for i in range(25)]
    meta = subprocess.run(["kcat", "-b", cluster.bootstrap, "-L", "-t", "kc"], capture_output=True, text=True, timeout=60)
    assert 'topic "kc" with 1 partitions' in meta.stdout


def test_metadata_auto_creates_topics(cluster):
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    producer.produce("auto-created", value=b"x")
    assert producer.flush(30) == 0
    md = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10)
    assert "auto-created" in md.topics
    assert len(md.topics["auto-created"].partitions) == 1
