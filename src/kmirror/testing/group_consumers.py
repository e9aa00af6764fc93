"""confluent-kafka consumers run in threads for group tests: each records what it is assigned
(from its rebalance callbacks, which librdkafka serves inside `poll`) and counts a record as
consumed only once its offset commit succeeded, so that across the group every record must be
counted exactly once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

PARTITIONS = 6


class GroupConsumer:
    def __init__(self, name: str, config: dict[str, Any], topic: str, consumed: list[tuple[str, int, int]],
                 lock: threading.Lock) -> None:
        self.name = name
        self.config = {"auto.offset.reset": "earliest", "enable.auto.commit": False, **config}
        self.topic = topic
        self.assigned: set[int] = set()  # partitions of `topic` (single-topic groups)
        self.assigned_topic_partitions: set[tuple[str, int]] = set()
        self.revoked: list[int] = []  # every partition ever revoked from this member, in order
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
            self.revoked.extend(tp.partition for tp in partitions)
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
                    # not counted: read it again (it may come back to another member instead)
                    self.errors.append(f"commit: {exc}")
                    try:
                        consumer.seek(TopicPartition(msg.topic() or self.topic, msg.partition() or 0, msg.offset() or 0))
                    except KafkaException as seek_error:  # no longer assigned: its next owner reads it
                        self.errors.append(f"seek: {seek_error}")
                    time.sleep(0.1)
                    continue
                with self._lock:
                    self._consumed.append((self.name, msg.partition() or 0, msg.offset() or 0))
                time.sleep(0.005)  # consume slowly enough for the group to change under load
        finally:
            consumer.close()
            with self._lock:
                self.assigned = set()


def wait_for(what: str, condition: Callable[[], bool], check: Callable[[], None] = lambda: None,
             timeout_s: float = 90, seen: Callable[[], object] | None = None) -> None:
    """Poll `condition` (running `check` each time) until it holds; on timeout the message
    includes what `seen` returns then (the members' assignments, say)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        check()
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}" + ("" if seen is None else f"; seen: {seen()}"))
        time.sleep(0.05)
    check()


class Group:
    def __init__(self, bootstrap: str, group_id: str, protocol: str, topic: str) -> None:
        self.bootstrap, self.group_id, self.protocol, self.topic = bootstrap, group_id, protocol, topic
        self.lock = threading.Lock()
        self.consumed: list[tuple[str, int, int]] = []
        self.members: dict[str, GroupConsumer] = {}
        self.errors: list[str] = []

    def add(self, name: str, **overrides: Any) -> GroupConsumer:
        """A member with the group's protocol; `overrides` are librdkafka configs of this member
        (keys with dots spelled with underscores: `group_protocol="consumer"`)."""
        config = {"bootstrap.servers": self.bootstrap, "group.id": self.group_id, "group.protocol": self.protocol,
                  **{k.replace("_", "."): v for k, v in overrides.items()}}
        self.members[name] = GroupConsumer(name, config, self.topic, self.consumed, self.lock).start()
        return self.members[name]

    def remove(self, name: str) -> None:
        member = self.members.pop(name)
        member.stop()
        self.errors.extend(member.errors)

    def assignments(self) -> dict[str, set[int]]:
        with self.lock:
            return {n: set(m.assigned) for n, m in self.members.items()}

    def no_overlap(self) -> None:
        seen: dict[int, str] = {}
        for name, parts in self.assignments().items():
            for p in parts:
                assert p not in seen, f"partition {p} assigned to {seen[p]} and {name} at once"
                seen[p] = name

    def covers_all(self, *, each_member_has_some: bool = True) -> bool:
        a = self.assignments()
        covered = set().union(*a.values()) if a else set()
        return covered == set(range(PARTITIONS)) and (not each_member_has_some or all(a.values()))


class Load:
    """Produces records to every partition of a `PARTITIONS`-partition topic until stopped;
    knows what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.acked: set[tuple[int, int]] = set()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        self._topic = topic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            self._producer.produce(self._topic, value=b"v%d" % i, partition=i % PARTITIONS, on_delivery=self._done)
            i += 1
            self._producer.poll(0)
            time.sleep(0.01)
        self._producer.flush(30)

    def _done(self, err: object, msg: object) -> None:
        if err is None:
            self.acked.add((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
