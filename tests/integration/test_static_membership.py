"""Static group membership (KIP-345) with confluent-kafka consumers (`group.instance.id`):
a restarted member gets its partitions back with no rebalance of the others; a duplicate
instance is fenced; DescribeGroups shows the instance ids."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import AdminClient

from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.processes import LocalCluster

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(module_node: LocalCluster) -> LocalCluster:
    """The module's tests share one node: each uses its own topic and group."""
    return module_node

SESSION_MS = 15_000
HEARTBEAT_MS = 500


class StaticConsumer:
    """A subscribed consumer recording its rebalance callbacks and errors."""

    def __init__(self, bootstrap: str, group: str, topic: str, instance: str, session_ms: int = SESSION_MS) -> None:
        self.instance = instance
        self.events: list[tuple[str, frozenset[int]]] = []
        self.assignment: frozenset[int] = frozenset()
        self.errors: list[KafkaError] = []
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.instance.id": instance,
            "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "error_cb": self.errors.append,
        })
        self.consumer.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, _c: Any, partitions: list[Any]) -> None:
        self.assignment = frozenset(p.partition for p in partitions)
        self.events.append(("assign", self.assignment))

    def _on_revoke(self, _c: Any, partitions: list[Any]) -> None:
        self.events.append(("revoke", frozenset(p.partition for p in partitions)))
        self.assignment = frozenset()

    closed = False

    def close(self) -> None:
        self.closed = True
        self.consumer.close()

    def poll(self) -> None:
        msg = self.consumer.poll(0.05)
        if msg is not None and msg.error() is not None:
            self.errors.append(msg.error())


def poll_until(consumers: list[StaticConsumer], done: Any, timeout_s: float = 40) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, [(c.instance, c.events, c.errors) for c in consumers]
        for c in consumers:
            c.poll()


@pytest.fixture
def consumers() -> Iterator[Callable[[StaticConsumer], StaticConsumer]]:
    """Registers consumers to close at the end of the test, whatever its outcome."""
    opened: list[StaticConsumer] = []

    def register(c: StaticConsumer) -> StaticConsumer:
        opened.append(c)
        return c

    yield register
    for c in opened:
        if not c.closed:
            c.close()


def test_restarted_static_member_gets_its_partitions_back_without_a_rebalance(cluster, consumers):
    create_topic(cluster.bootstrap, "st", partitions=6)
    group = "static-g"
    members = [consumers(StaticConsumer(cluster.bootstrap, group, "st", f"inst-{k}")) for k in range(3)]
    poll_until(members, lambda: sum(len(c.assignment) for c in members) == 6 and all(c.assignment for c in members))
    before = {c.instance: c.assignment for c in members}

    # DescribeGroups lists every member with its instance id.
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    described = admin.describe_consumer_groups([group])[group].result(timeout=30)
    assert sorted(m.group_instance_id for m in described.members) == ["inst-0", "inst-1", "inst-2"]

    for c in members:
        c.events.clear()
    # A static member's close() sends no LeaveGroup: the group keeps its place.
    members[1].close()
    closed_at = time.monotonic()
    restarted = consumers(StaticConsumer(cluster.bootstrap, group, "st", "inst-1"))
    others = [members[0], members[2]]
    poll_until([*others, restarted], lambda: bool(restarted.assignment))
    assert time.monotonic() - closed_at < SESSION_MS / 1000, "the restart must land within the session timeout"
    assert restarted.assignment == before["inst-1"]
    assert restarted.events == [("assign", before["inst-1"])]
    # The others keep heartbeating for several intervals: none is told to rebalance.
    watch_until = time.monotonic() + 6 * HEARTBEAT_MS / 1000
    poll_until(others, lambda: time.monotonic() >= watch_until)
    for c in others:
        assert c.events == [], (c.instance, c.events)
        assert c.assignment == before[c.instance]
    described = admin.describe_consumer_groups([group])[group].result(timeout=30)
    assert sorted(m.group_instance_id for m in described.members) == ["inst-0", "inst-1", "inst-2"]
    assert len(described.members) == 3


def test_stopped_static_member_is_removed_only_when_its_session_expires(cluster, consumers):
    create_topic(cluster.bootstrap, "exp", partitions=4)
    group, session_ms = "exp-g", 6_000
    members = [consumers(StaticConsumer(cluster.bootstrap, group, "exp", f"inst-{k}", session_ms)) for k in range(2)]
    poll_until(members, lambda: sum(len(c.assignment) for c in members) == 4 and all(c.assignment for c in members))
    for c in members:
        c.events.clear()
    members[1].close()  # no LeaveGroup from a static member
    stopped_at = time.monotonic()
    survivor = members[0]
    poll_until([survivor], lambda: survivor.assignment == frozenset(range(4)), timeout_s=30)
    rebalanced_after = time.monotonic() - stopped_at
    # The last heartbeat was at most one interval before the stop; the session runs from it.
    assert rebalanced_after >= (session_ms - HEARTBEAT_MS) / 1000 - 0.2, rebalanced_after
    assert survivor.events[0][0] == "revoke" and survivor.events[-1] == ("assign", frozenset(range(4)))


def test_duplicate_instance_id_fences_the_older_consumer(cluster, consumers):
    create_topic(cluster.bootstrap, "dup", partitions=2)
    group = "dup-g"
    first = consumers(StaticConsumer(cluster.bootstrap, group, "dup", "inst-x"))
    poll_until([first], lambda: first.assignment == frozenset({0, 1}))
    second = consumers(StaticConsumer(cluster.bootstrap, group, "dup", "inst-x"))

    def fenced() -> bool:
        # librdkafka raises FENCED_INSTANCE_ID as a fatal error of the older consumer.
        return any(e.code() in (KafkaError.FENCED_INSTANCE_ID, KafkaError._FATAL) for e in first.errors)

    poll_until([first, second], lambda: bool(second.assignment) and fenced())
    assert any("fenced" in e.str() for e in first.errors), first.errors
    assert second.assignment == frozenset({0, 1})
    assert not second.errors, second.errors


def test_coordinator_restart_keeps_static_members_and_their_assignment(cluster, consumers):
    """The group metadata record carries the instance ids: after the coordinator's kill -9 and
    restart, the members go on with no rebalance and a restarted instance gets its partitions."""
    create_topic(cluster.bootstrap, "fo", partitions=4)
    group, session_ms = "fo-g", 45_000
    members = [consumers(StaticConsumer(cluster.bootstrap, group, "fo", f"inst-{k}", session_ms)) for k in range(2)]
    poll_until(members, lambda: sum(len(c.assignment) for c in members) == 4 and all(c.assignment for c in members))
    before = {c.instance: c.assignment for c in members}
    for c in members:
        c.events.clear()

    cluster.kill9()
    cluster.up()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})

    def described_instances() -> list[str]:
        try:
            d = admin.describe_consumer_groups([group])[group].result(timeout=10)
        except Exception:  # the coordinator may still be loading its partition
            return []
        return sorted(m.group_instance_id for m in d.members)

    poll_until(members, lambda: described_instances() == ["inst-0", "inst-1"], timeout_s=40)
    members[1].close()
    restarted = consumers(StaticConsumer(cluster.bootstrap, group, "fo", "inst-1", session_ms))
    poll_until([members[0], restarted], lambda: bool(restarted.assignment))
    assert restarted.assignment == before["inst-1"]
    watch_until = time.monotonic() + 6 * HEARTBEAT_MS / 1000
    poll_until([members[0], restarted], lambda: time.monotonic() >= watch_until)
    assert members[0].events == [], members[0].events
    assert restarted.events == [("assign", before["inst-1"])]
