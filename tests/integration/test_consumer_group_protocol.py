"""KIP-848 consumer groups on real kmirror processes, driven by confluent-kafka with
`group.protocol=consumer`: three members share a topic with no overlap, a member leaving and
one joining move partitions, every record is consumed and committed exactly once, a classic
group runs beside it, AdminClient lists and describes both types, a regex subscription, a
static member's restart, and a restart of the broker reloads the group from `__consumer_offsets`."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, ConsumerGroupType
from confluent_kafka.admin import AdminClient

from kmirror.testing.group_consumers import PARTITIONS, Group, GroupConsumer, Load, wait_for
from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.processes import LocalCluster, free_port_block

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One node shared by the module's tests, each with its own topics and groups; the test
    that restarts it comes last."""
    # a 1 s heartbeat interval makes reconciliation steps quick (Kafka's default is 5 s)
    with LocalCluster(dir=tmp_path_factory.mktemp("groups") / "cluster", port=free_port_block(),
                      overrides={"group.consumer.heartbeat.interval.ms": "1000"}) as c:
        yield c


def sizes(group: Group) -> list[int]:
    return sorted(len(p) for p in group.assignments().values())


def test_three_members_leave_and_join_with_every_record_consumed_once(cluster: LocalCluster):
    create_topic(cluster.bootstrap, "orders", partitions=PARTITIONS)
    create_topic(cluster.bootstrap, "audit", partitions=PARTITIONS)
    load = Load(cluster.bootstrap, "orders")
    group = Group(cluster.bootstrap, "kip848", "consumer", "orders")
    try:
        for name in ("c1", "c2", "c3"):
            group.add(name)
        # covered with no overlap at every step; balanced once the reconciliation is over
        # (a partition reaches the new member only after its old owner has revoked it)
        wait_for("three members with two partitions each", lambda: group.covers_all() and sizes(group) == [2, 2, 2],
                 group.no_overlap)

        # a classic group on another topic, beside it on the same coordinator
        classic = Group(cluster.bootstrap, "classic-side", "classic", "audit")
        classic.add("k1")
        wait_for("the classic member's assignment", classic.covers_all)

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        listed = admin.list_consumer_groups().result(30)
        types = {g.group_id: g.type for g in listed.valid}
        assert types["kip848"] == ConsumerGroupType.CONSUMER
        assert types["classic-side"] == ConsumerGroupType.CLASSIC
        described = admin.describe_consumer_groups(["kip848", "classic-side"])
        kip848 = described["kip848"].result(30)
        assert kip848.type == ConsumerGroupType.CONSUMER
        assert kip848.partition_assignor == "uniform"
        assert len(kip848.members) == 3
        members_parts = sorted(tp.partition for m in kip848.members for tp in m.assignment.topic_partitions)
        assert members_parts == list(range(PARTITIONS))
        assert described["classic-side"].result(30).type == ConsumerGroupType.CLASSIC
        classic.remove("k1")

        group.remove("c3")  # leaves with epoch -1: c1 and c2 take over its partitions
        wait_for("two members with three partitions each", lambda: group.covers_all() and sizes(group) == [3, 3],
                 group.no_overlap)

        group.add("c4")  # a new member gets some
        wait_for("the new member's partitions", lambda: group.covers_all() and sizes(group) == [2, 2, 2],
                 group.no_overlap)
        wait_for("the new member consuming", lambda: any(name == "c4" for name, _, _ in list(group.consumed)),
                 group.no_overlap)
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
    assert {name for name, _, _ in group.consumed} == {"c1", "c2", "c3", "c4"}


def test_a_regex_subscription_gets_the_matching_topics(cluster: LocalCluster):
    for name in ("rx-a", "rx-b", "other"):
        create_topic(cluster.bootstrap, name, partitions=2)
    consumer = GroupConsumer("x1", {"bootstrap.servers": cluster.bootstrap, "group.id": "rx",
                                    "group.protocol": "consumer"}, "^rx-.*", [], threading.Lock()).start()
    try:
        wait_for("the regex member's assignment", lambda: len(consumer.assigned_topic_partitions) == 4)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        member = admin.describe_consumer_groups(["rx"])["rx"].result(30).members[0]
        assert sorted((tp.topic, tp.partition) for tp in member.assignment.topic_partitions) == [
            ("rx-a", 0), ("rx-a", 1), ("rx-b", 0), ("rx-b", 1)]
    finally:
        consumer.stop()


def test_a_static_member_restarting_gets_its_partitions_back_and_the_others_keep_theirs(cluster: LocalCluster):
    create_topic(cluster.bootstrap, "static", partitions=PARTITIONS)
    lock = threading.Lock()

    def member(name: str, instance_id: str) -> GroupConsumer:
        config = {"bootstrap.servers": cluster.bootstrap, "group.id": "static-848", "group.protocol": "consumer",
                  "group.instance.id": instance_id}
        return GroupConsumer(name, config, "static", [], lock).start()

    a, b = member("a", "instance-a"), member("b", "instance-b")
    wait_for("both members' partitions",
             lambda: (a.assigned | b.assigned) == set(range(PARTITIONS)) and bool(a.assigned) and bool(b.assigned))
    a_parts, b_parts = set(a.assigned), set(b.assigned)
    b_revoked = len(b.revoked)  # whichever joined first gave partitions up to the other
    a.stop()  # a static member leaves with epoch -2: its partitions wait for it
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    described = admin.describe_consumer_groups(["static-848"])["static-848"].result(30)
    held = {m.group_instance_id: {tp.partition for tp in m.assignment.topic_partitions} for m in described.members}
    assert held == {"instance-a": a_parts, "instance-b": b_parts}
    again = member("a-again", "instance-a")
    try:
        wait_for("the restarted member's partitions", lambda: again.assigned == a_parts, timeout_s=60)
        assert b.assigned == b_parts
        assert b.revoked[b_revoked:] == []  # the other member's assignment never moved
    finally:
        again.stop()
        b.stop()


def test_a_restart_reloads_the_group_and_its_offsets(cluster: LocalCluster):
    create_topic(cluster.bootstrap, "events", partitions=PARTITIONS)
    load = Load(cluster.bootstrap, "events")
    wait_for("records on every partition", lambda: {p for p, _ in list(load.acked)} == set(range(PARTITIONS)))
    load.stop()
    group = Group(cluster.bootstrap, "reloaded", "consumer", "events")
    for name in ("r1", "r2"):
        group.add(name)
    wait_for("two members covering every partition", group.covers_all, group.no_overlap)
    wait_for("everything consumed", lambda: len(group.consumed) >= len(load.acked))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    before = admin.describe_consumer_groups(["reloaded"])["reloaded"].result(30)
    for name in list(group.members):
        group.remove(name)

    cluster.kill9()
    cluster.up()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    after = admin.describe_consumer_groups(["reloaded"])["reloaded"].result(60)
    # reloaded as a consumer group (an offsets-only group would come back as a classic one)
    assert before.type == after.type == ConsumerGroupType.CONSUMER
    assert after.state == ConsumerGroupState.EMPTY
    committed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("reloaded")])["reloaded"].result(30)
    ends = Counter(p for p, _ in load.acked)
    assert {tp.partition: tp.offset for tp in committed.topic_partitions} == dict(ends)
