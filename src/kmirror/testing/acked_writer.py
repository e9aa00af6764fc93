"""A background idempotent acks=all producer for real-process failure tests, and the check
that every record it got acknowledged is at its offset in another cluster exactly once."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient


class AckedWriter(threading.Thread):
    """Writes unique keyed values (`<tag>-<i>`, header `writer`) to every partition of `topic`
    until `finish()`; remembers what was acknowledged at which (partition, offset)."""

    def __init__(self, bootstrap: str, tag: str, topic: str, partitions: int, client_log: Path | None = None,
                 batch_size: int | None = None) -> None:
        """`client_log`: a file for the producer's log with librdkafka's idempotence debug
        (`debug=eos`: producer ids, epochs, drains and their reasons), to explain a duplicate.
        `batch_size`: librdkafka's `batch.size`, for a topic whose `segment.bytes` is smaller
        than the batches a backlog would build (the broker refuses those, RECORD_LIST_TOO_LARGE)."""
        super().__init__(daemon=True)
        config: dict[str, Any] = {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "compression.type": "lz4", "linger.ms": 10, "message.timeout.ms": 120000}
        if batch_size is not None:
            config["batch.size"] = batch_size
        if client_log is not None:
            logger = logging.getLogger(f"kmirror.testing.acked_writer.{tag}")
            handler = logging.FileHandler(client_log)
            handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
            logger.addHandler(handler)
            logger.setLevel(logging.DEBUG)
            logger.propagate = False
            config |= {"debug": "eos", "logger": logger}
        self.producer = Producer(config)
        self.tag = tag
        self.topic = topic
        self.partitions = partitions
        self.acked: dict[tuple[int, int], bytes] = {}
        # Acknowledged without an offset: librdkafka acks the records of a request whose answer
        # was lost (possibly persisted) once a later request of the partition succeeds.
        self.acked_unplaced: list[tuple[int, bytes]] = []
        self.failed: list[KafkaError] = []
        self.stop = threading.Event()

    def on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is None and (msg.offset() is None or msg.offset() < 0):
            self.acked_unplaced.append((msg.partition(), msg.value()))
        elif err is None:
            key = (msg.partition(), msg.offset())
            assert key not in self.acked, "two acknowledged records at one offset"
            self.acked[key] = msg.value()
        else:
            self.failed.append(err)

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(self.topic, key=b"k%d" % (i % 11), value=b"%s-%d" % (self.tag.encode(), i),
                                      partition=i % self.partitions, headers=[("writer", self.tag.encode())],
                                      on_delivery=self.on_delivery)
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.01)
            if i % 50 == 0:
                time.sleep(0.05)
        self.producer.flush(120)

    def finish(self) -> None:
        self.stop.set()
        self.join(180)
        assert not self.is_alive()


def assert_acked_mirrored_once(bootstrap: str, writer: AckedWriter, *, every_value_acked: bool = False,
                               timeout_s: float = 90) -> None:
    """Every record `writer` got acknowledged is at its offset in the cluster at `bootstrap`,
    no offset is read twice and no value of the writer appears twice; with
    `every_value_acked`, the writer's values there are exactly the acknowledged ones."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    partitions = range(writer.partitions)
    consumer.assign([TopicPartition(writer.topic, p, 0) for p in partitions])
    last = {p: max(o for q, o in writer.acked if q == p) for p in partitions}
    seen: dict[tuple[int, int], bytes] = {}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any((p, last[p]) not in seen for p in partitions):
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        partition, offset, value = msg.partition(), msg.offset(), msg.value()
        assert partition is not None and offset is not None and value is not None
        key = (partition, offset)
        assert key not in seen, f"{key} read twice"
        seen[key] = value
    consumer.close()
    missing = [k for k, v in writer.acked.items() if seen.get(k) != v]
    assert not missing, f"{len(missing)} acknowledged records not mirrored, e.g. {missing[:3]}"
    present = {(p, v) for (p, _), v in seen.items()}
    missing_unplaced = [pv for pv in writer.acked_unplaced if pv not in present]
    assert not missing_unplaced, f"{len(missing_unplaced)} records acknowledged without an offset missing"
    values = [v for v in seen.values() if v.startswith(writer.tag.encode() + b"-")]
    assert len(values) == len(set(values)), "a record mirrored twice"
    if every_value_acked:
        assert len(values) == len(writer.acked) + len(writer.acked_unplaced), \
            "a record of the writer that was never acknowledged"


def partition_layout(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr), from Metadata."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p: (m.leader, list(m.replicas), list(m.isrs)) for p, m in md.topics[topic].partitions.items()}
