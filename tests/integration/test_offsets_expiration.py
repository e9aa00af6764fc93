"""Committed-offset expiration on a real node (`offsets.retention.minutes=1`, checked every
500 ms), driven by confluent-kafka: the offsets of groups whose consumers closed (a classic
group, a KIP-848 consumer group, a committer without group membership) are gone, and their
groups with them, once the retention has passed since the group became empty (the classic
group) or since the commit (the others), across a `kill -9` and restart of the node; the
offsets of groups whose members stay are kept."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from kmirror.testing.group_consumers import GroupConsumer, wait_for
from kmirror.testing.kafka_clients import create_topic, produce_acked
from kmirror.testing.processes import LocalCluster, free_port_block

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RETENTION_S = 60
TOPIC, PARTITIONS, RECORDS = "exp", 2, 10


@pytest.fixture
def cluster(tmp_path) -> Iterator[LocalCluster]:
    with LocalCluster(dir=tmp_path / "cluster", port=free_port_block(), overrides={
         "offsets.retention.minutes": "1", "offsets.retention.check.interval.ms": "500",
         "group.consumer.heartbeat.interval.ms": "1000"}) as c:
        yield c


def committed(admin: AdminClient, group: str) -> dict[int, int]:
    """Every offset the group has committed (OffsetFetch of all its partitions)."""
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def listed(admin: AdminClient) -> set[str]:
    return {g.group_id for g in admin.list_consumer_groups().result(30).valid}


def consume_commit_close(bootstrap: str, group: str, protocol: str) -> float:
    """Read the topic as a member of `group`, commit, close. The time the offsets' retention
    starts at the latest: just before the close for a classic group (from then on it is
    Empty), just before the last commit for a consumer group (it counts from each commit)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    seen, last_commit_at = 0, 0.0
    deadline = time.monotonic() + 60
    while seen < RECORDS:
        assert time.monotonic() < deadline, f"{group} read {seen} records"
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            seen += 1
            last_commit_at = time.time()
            consumer.commit(message=msg, asynchronous=False)
    closing_at = time.time()
    consumer.close()
    return closing_at if protocol == "classic" else last_commit_at


def commit_without_membership(bootstrap: str, group: str) -> float:
    """OffsetCommit with generation -1 (no subscribe): the time just before the commit."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    committing_at = time.time()
    consumer.commit(offsets=[TopicPartition(TOPIC, 0, 3)], asynchronous=False)
    consumer.close()
    return committing_at


def test_offsets_of_dead_groups_expire_and_live_groups_keep_theirs(cluster: LocalCluster):
    create_topic(cluster.bootstrap, TOPIC, partitions=PARTITIONS)
    produce_acked(cluster.bootstrap, TOPIC, RECORDS, PARTITIONS)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    live = {
        "live-classic": GroupConsumer("a", {"bootstrap.servers": cluster.bootstrap, "group.id": "live-classic",
                                            "group.protocol": "classic", "session.timeout.ms": 10_000},
                                      TOPIC, [], threading.Lock()),
        "live-848": GroupConsumer("b", {"bootstrap.servers": cluster.bootstrap, "group.id": "live-848",
                                        "group.protocol": "consumer"}, TOPIC, [], threading.Lock()),
    }
    for consumer in live.values():
        consumer.start()
    try:
        for group in live:
            wait_for(f"{group} to commit every record", lambda g=group: sum(committed(admin, g).values()) == RECORDS)
        # the retention starts when the classic group becomes empty, and at each commit for the others
        starts = {
            "dead-classic": consume_commit_close(cluster.bootstrap, "dead-classic", "classic"),
            "dead-848": consume_commit_close(cluster.bootstrap, "dead-848", "consumer"),
            "standalone": commit_without_membership(cluster.bootstrap, "standalone"),
        }
        assert all(committed(admin, g) for g in starts) and set(starts) <= listed(admin)

        # a coordinator that loads the partitions again expires them at the same times
        cluster.kill9()
        cluster.up()
        # a new admin client: librdkafka's, asked about a group before the restart, may never
        # look its coordinator up again (its requests for that group time out)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})

        gone_at: dict[str, float] = {}

        def all_gone() -> bool:
            groups = listed(admin)
            for group in set(starts) - set(gone_at):
                if group not in groups and not committed(admin, group):
                    gone_at[group] = time.time()
            return set(gone_at) == set(starts)

        wait_for("the dead groups to expire", all_gone, timeout_s=RETENTION_S * 3, seen=lambda: gone_at)
        for group, start in starts.items():
            assert gone_at[group] >= start + RETENTION_S, (group, gone_at[group] - start)
        assert {g: sum(committed(admin, g).values()) for g in live} == {g: RECORDS for g in live}
        assert set(live) <= listed(admin)
        assert not [e for c in live.values() for e in c.errors if "commit" in e]
    finally:
        for consumer in live.values():
            consumer.stop()
