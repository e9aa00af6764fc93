"""Online migration of live consumer groups between the classic protocol and the KIP-848
consumer protocol on real kmirror processes, driven by confluent-kafka (librdkafka 2.16) as a
rolling restart would: one member at a time restarts with the other `group.protocol` while a
producer writes. No partition is ever assigned to two members (sampled every 50 ms), every
acknowledged record is consumed and committed exactly once (counted), the group's type follows
its members, and static members keep their partitions across protocols without the others'
moving. kafka-python (the Java client's classic protocol) takes part as a classic member."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient
from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition

from kmirror.testing.group_consumers import PARTITIONS, Group, GroupConsumer, Load, wait_for
from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.processes import LocalCluster, free_port_block

pytestmark = pytest.mark.integration

# classic members heartbeat every second, so that they learn of a rebalance as quickly as the
# consumer protocol's members (the cluster's group.consumer.heartbeat.interval.ms). librdkafka's
# cooperative-sticky leader copies each member's sticky user data into its assignment, which no
# upgrade may lose: once such a group has rebalanced, an upgrade is refused (as by Kafka, last test).
COOPERATIVE = {"partition_assignment_strategy": "cooperative-sticky", "heartbeat_interval_ms": 1000}
EAGER = {"partition_assignment_strategy": "range", "heartbeat_interval_ms": 1000}
CONSUMER = {"group_protocol": "consumer"}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(dir=tmp_path / "cluster", port=free_port_block(),
                      overrides={"group.consumer.heartbeat.interval.ms": "1000"}) as c:
        yield c


def group_type(admin: AdminClient, group_id: str) -> ConsumerGroupType:
    listed = admin.list_consumer_groups().result(30)
    return {g.group_id: g.type for g in listed.valid}[group_id]


def balanced(group: Group) -> bool:
    return group.covers_all() and sorted(len(p) for p in group.assignments().values()) == [2, 2, 2]


def test_a_live_group_is_upgraded_then_downgraded_one_member_at_a_time(cluster: LocalCluster):
    create_topic(cluster.bootstrap, "rolling", partitions=PARTITIONS)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    load = Load(cluster.bootstrap, "rolling")
    group = Group(cluster.bootstrap, "rolling", "classic", "rolling")
    try:
        for name in ("c1", "c2", "c3"):
            group.add(name, **EAGER)
        wait_for("three classic members", lambda: balanced(group), group.no_overlap, seen=group.assignments)
        assert group_type(admin, "rolling") == ConsumerGroupType.CLASSIC

        for old, new in (("c1", "n1"), ("c2", "n2"), ("c3", "n3")):
            group.remove(old)  # the rolling restart: the member stops (LeaveGroup), then starts again
            group.add(new, **CONSUMER)
            wait_for(f"{new} in the upgraded group", lambda new=new: balanced(group) and bool(group.members[new].assigned),
                     group.no_overlap, seen=lambda: (group.assignments(), group.errors[-5:]))
            assert group_type(admin, "rolling") == ConsumerGroupType.CONSUMER
        described = admin.describe_consumer_groups(["rolling"])["rolling"].result(30)
        assert described.type == ConsumerGroupType.CONSUMER
        assert sorted(tp.partition for m in described.members for tp in m.assignment.topic_partitions) == list(
            range(PARTITIONS))

        for old, new in (("n1", "d1"), ("n2", "d2"), ("n3", "d3")):
            group.remove(old)
            group.add(new, **EAGER)
            wait_for(f"{new} in the group", lambda new=new: balanced(group) and bool(group.members[new].assigned),
                     group.no_overlap, seen=lambda: (group.assignments(), group.errors[-5:]))
        # the last member of the consumer protocol left: a classic group again
        assert group_type(admin, "rolling") == ConsumerGroupType.CLASSIC
    finally:
        load.stop()
    try:
        wait_for("every acknowledged record consumed",
                 lambda: len({(p, o) for _, p, o in group.consumed}) >= len(load.acked), group.no_overlap)
    finally:
        for name in list(group.members):
            group.remove(name)
    counts = Counter((p, o) for _, p, o in group.consumed)
    duplicates = {k: v for k, v in counts.items() if v > 1}
    assert not duplicates, f"records consumed and committed twice: {sorted(duplicates)[:10]}; {group.errors[:5]}"
    assert set(counts) == load.acked
    consumers = {name for name, _, _ in group.consumed}
    assert {"c2", "c3", "n1", "n2", "n3", "d1", "d2"} <= consumers  # c1 and d3 may have had no time to


def test_static_members_restarting_with_the_consumer_protocol_keep_their_partitions(cluster: LocalCluster):
    create_topic(cluster.bootstrap, "static-rolling", partitions=PARTITIONS)
    lock = threading.Lock()

    def member(name: str, instance_id: str, **overrides: object) -> GroupConsumer:
        config = {"bootstrap.servers": cluster.bootstrap, "group.id": "static-rolling",
                  "group.instance.id": instance_id, **{k.replace("_", "."): v for k, v in overrides.items()}}
        return GroupConsumer(name, config, "static-rolling", [], lock).start()

    members = {i: member(f"c{i}", f"instance-{i}", group_protocol="classic", **EAGER) for i in (1, 2, 3)}
    wait_for("three static classic members",
             lambda: set().union(*(m.assigned for m in members.values())) == set(range(PARTITIONS))
             and all(len(m.assigned) == 2 for m in members.values()))
    held = {i: set(m.assigned) for i, m in members.items()}
    revoked = {i: len(m.revoked) for i, m in members.items()}
    try:
        for i in (1, 2, 3):
            members[i].stop()  # a static member leaves no LeaveGroup behind
            members[i] = member(f"n{i}", f"instance-{i}", **CONSUMER)
            wait_for(f"instance-{i} back with its partitions", lambda i=i: members[i].assigned == held[i])
            revoked[i] = len(members[i].revoked)  # the new member's own count from here on
            for j in (1, 2, 3):
                if j != i:  # the others' partitions never moved (eager members revoke all on a rebalance)
                    assert members[j].assigned == held[j]
                    assert len(members[j].revoked) == revoked[j]
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        described = admin.describe_consumer_groups(["static-rolling"])["static-rolling"].result(30)
        assert described.type == ConsumerGroupType.CONSUMER
        assert {m.group_instance_id: {tp.partition for tp in m.assignment.topic_partitions}
                for m in described.members} == {f"instance-{i}": held[i] for i in (1, 2, 3)}
    finally:
        for m in members.values():
            m.stop()


def test_a_restart_in_the_middle_of_a_migration_reloads_the_mixed_group(cluster: LocalCluster):
    create_topic(cluster.bootstrap, "halfway", partitions=PARTITIONS)
    group = Group(cluster.bootstrap, "halfway", "classic", "halfway")
    try:
        for name in ("c1", "c2"):
            group.add(name, **EAGER)
        group.add("n1", **CONSUMER)
        wait_for("two classic members and one of the consumer protocol", lambda: balanced(group), group.no_overlap)

        cluster.kill9()  # the classic members' protocols are read back from ClassicMemberMetadata
        cluster.up()
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        assert group_type(admin, "halfway") == ConsumerGroupType.CONSUMER
        group.add("n2", **CONSUMER)
        wait_for("four members after the restart",
                 lambda: group.covers_all() and sorted(len(p) for p in group.assignments().values()) == [1, 1, 2, 2],
                 group.no_overlap)

        group.remove("n1")
        group.remove("n2")  # the last member of the consumer protocol: back to a classic group
        wait_for("the classic members alone", lambda: group.covers_all() and sorted(
            len(p) for p in group.assignments().values()) == [3, 3], group.no_overlap)
        assert group_type(admin, "halfway") == ConsumerGroupType.CLASSIC
    finally:
        for name in list(group.members):
            group.remove(name)


class _KafkaPythonMember(ConsumerRebalanceListener):
    """A kafka-python consumer (the classic protocol, as the Java client runs it) polled in a
    thread; its rebalance listener records what it is assigned."""

    def __init__(self, bootstrap: str, group_id: str, topic: str, lock: threading.Lock) -> None:
        self.assigned: set[int] = set()
        self._lock, self._stop = lock, threading.Event()
        self._consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group_id, heartbeat_interval_ms=1000,
                                       enable_auto_commit=False, auto_offset_reset="earliest")
        self._consumer.subscribe([topic], listener=self)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        with self._lock:
            self.assigned -= {tp.partition for tp in revoked}

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        with self._lock:
            self.assigned |= {tp.partition for tp in assigned}

    def _run(self) -> None:
        while not self._stop.is_set():
            self._consumer.poll(timeout_ms=200)
        self._consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def test_a_kafka_python_classic_member_joins_a_consumer_group_and_stays_through_the_downgrade(cluster: LocalCluster):
    create_topic(cluster.bootstrap, "mixed", partitions=PARTITIONS)
    lock = threading.Lock()
    n1 = GroupConsumer("n1", {"bootstrap.servers": cluster.bootstrap, "group.id": "mixed",
                              "group.protocol": "consumer"}, "mixed", [], lock).start()
    wait_for("the consumer member alone", lambda: len(n1.assigned) == PARTITIONS)
    classic = _KafkaPythonMember(cluster.bootstrap, "mixed", "mixed", lock)

    def no_overlap() -> None:
        with lock:
            assert not n1.assigned & classic.assigned, (n1.assigned, classic.assigned)

    try:
        wait_for("the partitions shared", lambda: len(n1.assigned) == 3 and len(classic.assigned) == 3, no_overlap)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        assert group_type(admin, "mixed") == ConsumerGroupType.CONSUMER
        n1.stop()
        wait_for("the classic member alone", lambda: len(classic.assigned) == PARTITIONS, no_overlap)
        assert group_type(admin, "mixed") == ConsumerGroupType.CLASSIC
    finally:
        n1.stop()
        classic.stop()


def test_a_cooperative_sticky_group_of_librdkafka_is_not_upgraded_once_it_rebalanced(cluster: LocalCluster):
    create_topic(cluster.bootstrap, "sticky", partitions=PARTITIONS)
    group = Group(cluster.bootstrap, "sticky", "classic", "sticky")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    try:
        group.add("c1", **COOPERATIVE)
        wait_for("c1 alone", lambda: group.covers_all(), group.no_overlap)
        group.add("c2", **COOPERATIVE)  # a rebalance: assignments now carry the members' user data
        wait_for("two classic members", lambda: sorted(len(p) for p in group.assignments().values()) == [3, 3],
                 group.no_overlap)
        group.add("n1", **CONSUMER)
        n1 = group.members["n1"]
        wait_for("the upgrade refused", lambda: bool(n1.errors), timeout_s=30, seen=group.assignments)
        # GROUP_ID_NOT_FOUND ("... an unsupported custom assignor is in use ..."), fatal to librdkafka
        assert "The group id does not exist" in n1.errors[0], n1.errors
        assert group_type(admin, "sticky") == ConsumerGroupType.CLASSIC
        assert sorted(len(p) for name, p in group.assignments().items() if name != "n1") == [3, 3]
    finally:
        for name in list(group.members):
            group.remove(name)
