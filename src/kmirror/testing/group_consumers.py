"""confluent-kafka consumers run in threads for group tests: each records what it is assigned
(from its rebalance callbacks, which librdkafka serves inside `poll`) and counts a record as
consumed only once its offset commit succeeded, so that across the group every record must be
counted exactly once."""

from __future__ import annotations

import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition


class GroupConsumer:
    def __init__(self, name: str, config: dict[str, Any], topic: str, consumed: list[tuple[str, int, int]],
                 lock: threading.Lock) -> None:
        self.name = name
        self.config = {"auto.offset.reset": "earliest", "enable.auto.commit": False, **config}
        self.topic = topic
        self.assigned: set[int] = set()  # partitions of `topic` (single-topic groups)
        self.assigned_topic_partitions: set[tuple[str, int]] = set()
        self.errors: list[str] = []
        self._consumed, self._lock = consumed, lock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> GroupConsumer:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 30) -> None:
        """Leave the group (close) and wait for the thread."""
        self._stop.set()
        self._thread.join(timeout_s)

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self._lock:
            self.assigned |= {tp.partition for tp in partitions}
            self.assigned_topic_partitions |= {(tp.topic, tp.partition) for tp in partitions}

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        with self._lock:
            self.assigned -= {tp.partition for tp in partitions}
            self.assigned_topic_partitions -= {(tp.topic, tp.partition) for tp in partitions}

    def _run(self) -> None:
        consumer = Consumer(self.config)
        consumer.subscribe([self.topic], on_assign=self._on_assign, on_revoke=self._on_revoke,
                           on_lost=self._on_revoke)
        try:
            while not self._stop.is_set():
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    self.errors.append(str(msg.error()))
                    continue
                try:
                    consumer.commit(message=msg, asynchronous=False)
                except KafkaException as exc:
                    self.errors.append(f"commit: {exc}")
                    continue
                with self._lock:
                    self._consumed.append((self.name, msg.partition() or 0, msg.offset() or 0))
                time.sleep(0.005)  # consume slowly enough for the group to change under load
        finally:
            consumer.close()
            with self._lock:
                self.assigned = set()
