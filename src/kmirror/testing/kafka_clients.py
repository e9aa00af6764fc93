"""Real Kafka clients (confluent-kafka) used by integration tests and benchmarks."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None,
                 replication_factor: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                                            config=config or {})])
    futures[name].result(timeout=30)


def consume_partition(bootstrap: str, topic: str, partition: int, count: int, timeout_s: float = 30) -> list[Message]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0)])
    out: list[Message] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None, msg.error()
        out.append(msg)
    consumer.close()
    return out


def consume_to_end(bootstrap: str, topic: str, isolation: str, *, partition: int = 0, until_offset: int = 0,
                   timeout_s: float = 60) -> list[tuple[int, bytes]]:
    """(offset, value) of every record a confluent-kafka consumer with `isolation.level`
    `isolation` delivers from offset 0 up to the partition's end for that isolation (HW or
    LSO), reading until the end reached is at least `until_offset`; records at or past
    `until_offset` are left out when it is given."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4()}",
                         "isolation.level": isolation, "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, partition, 0)])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            error, offset = msg.error(), msg.offset() or 0
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF and offset >= until_offset:
                    return got
                continue
            if not until_offset or offset < until_offset:
                got.append((offset, msg.value() or b""))
        raise AssertionError(f"{isolation} consumer of {topic}-{partition} did not reach offset {until_offset}: {got}")
    finally:
        consumer.close()


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
    out: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < count and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        out.append((msg.partition() or 0, msg.offset() or 0, msg.value() or b""))
        consumer.commit(message=msg, asynchronous=False)
    consumer.close()
    return out


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    offsets = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    consumer.close()
    return {tp.partition: tp.offset for tp in offsets}




def watermarks(bootstrap: str, topic: str, partition: int, isolation_level: str | None = None) -> tuple[int, int]:
    """(log start offset, end) of one partition, never cached; the end is the high watermark
    for read_uncommitted, the last stable offset for read_committed (librdkafka's default)."""
    config = {"bootstrap.servers": bootstrap, "group.id": "probe", "enable.auto.commit": False}
    consumer = Consumer(config if isolation_level is None else {**config, "isolation.level": isolation_level})
    try:
        low, high = _watermark_offsets(consumer, TopicPartition(topic, partition))
        return int(low), int(high)
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """The high watermark of partitions 0..partitions-1, from one consumer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "enable.auto.commit": False})
    try:
        return [int(_watermark_offsets(consumer, TopicPartition(topic, p))[1]) for p in range(partitions)]
    finally:
        consumer.close()


# A broker learns of a new topic's partitions after the controller has answered CreateTopics
# (Kafka's brokers apply metadata asynchronously): ListOffsets may answer these for a moment, and
# a newly elected leader answers OFFSET_NOT_AVAILABLE until its high watermark has caught up.
_TRANSIENT = frozenset({KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError.NOT_LEADER_FOR_PARTITION,
                        KafkaError.LEADER_NOT_AVAILABLE, KafkaError.OFFSET_NOT_AVAILABLE})


def _watermark_offsets(consumer: Consumer, tp: TopicPartition, timeout_s: float = 30) -> tuple[int, int]:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
            return int(low), int(high)
        except KafkaException as exc:
            if exc.args[0].code() not in _TRANSIENT or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def produce_refused(bootstrap: str, topic: str) -> int:
    """The error code of one record sent to partition 0 without retries; it must be refused."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.send.max.retries": 0})
    errors: list[KafkaError | None] = []
    producer.produce(topic, value=b"nope", partition=0, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert errors and errors[0] is not None
    return int(errors[0].code())


def produce_delivered(config: dict[str, str | int | float | bool], topic: str,
                      records: Iterable[tuple[int, bytes | None, bytes]],
                      headers: list[tuple[str, str | bytes | None]] | None = None,
                      flush_timeout_s: float = 60) -> list[tuple[int, int]]:
    """Send (partition, key, value) records from one producer made of `config`; every one must
    be acknowledged. The (partition, offset) of each, in delivery order."""
    producer = Producer(config)
    delivered: list[tuple[int, int]] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        assert err is None, err
        delivered.append((int(msg.partition() or 0), int(msg.offset() or 0)))

    for partition, key, value in records:
        producer.produce(topic, key=key, value=value, partition=partition, headers=headers, on_delivery=on_delivery)
    assert producer.flush(flush_timeout_s) == 0
    return delivered


def leaders_and_isr_sizes(bootstrap: str, topic: str) -> dict[int, tuple[int, int]]:
    """{partition: (leader, ISR size)} of `topic`, from confluent-kafka's metadata."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p: (m.leader, len(m.isrs)) for p, m in md.topics[topic].partitions.items()}


def partition_count(bootstrap: str, topic: str) -> int:
    """How many partitions the cluster's Metadata lists for `topic`."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def produce_values(config: dict[str, str], topic: str, values: list[bytes]) -> None:
    """Produce `values` with a confluent-kafka producer of `config` (security settings included)
    and wait until every one is acknowledged."""
    producer = Producer({**config, "linger.ms": 5})
    for v in values:
        producer.produce(topic, value=v)
    assert producer.flush(60) == 0


def consume_values(config: dict[str, str], topic: str, count: int, group: str) -> list[bytes]:
    """Up to `count` values of `topic` read by a confluent-kafka consumer of `group` from the
    earliest offset (fewer if they do not arrive within 90 s)."""
    consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    out: list[bytes] = []
    deadline = time.monotonic() + 90
    try:
        while len(out) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                out.append(msg.value() or b"")
    finally:
        consumer.close()
    return out


def idempotent_and_open_transaction(bootstrap: str, topic: str, transactional_id: str,
                                    txn_records: int) -> tuple[Producer, Producer]:
    """Partition 0 of `topic` gets 5 records from an idempotent producer (sequences 0-4), then
    `txn_records` from a transactional producer whose transaction is left open; both
    producers are returned."""
    idempotent = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(5):
        idempotent.produce(topic, value=b"%d" % i, partition=0)
    assert idempotent.flush(30) == 0
    txn = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(txn_records):
        txn.produce(topic, value=b"t%d" % i, partition=0)
    assert txn.flush(30) == 0  # written; the transaction stays open
    return idempotent, txn
