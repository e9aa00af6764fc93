"""KIP-1279 MirrorMetadataManager with real processes: consumer group offsets and ACLs of the
source appear at the destination (as `mirror.groups.include` / `mirror.acl.include` select),
and after a failover a consumer of the same group resumes at the destination exactly where
it stopped at the source: no record read twice, none skipped."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from kmirror.testing.metrics_scrape import request_count
from kmirror.testing.mirror_clusters import create_mirror, partition_states, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration

TOPIC = "orders"
PARTITIONS = 2
RECORDS = 80  # per partition
MIRROR = "dr"
REFRESH = {"mirror.metadata.refresh.interval.ms": "500"}


@pytest.fixture
def dest_overrides() -> dict[str, str]:
    return dict(REFRESH)


@pytest.fixture
def source_overrides() -> dict[str, str]:
    return {"metrics.port": str(free_port_block())}  # the sync's ListGroups, counted


def wait_sync_rounds(source: LocalCluster, rounds: int = 3) -> None:
    """Until the destination's group sync has listed the source's groups `rounds` more times:
    `rounds - 1` whole sync passes ran after the call (a pass lists, then syncs each group)."""
    port = int(source.overrides["metrics.port"])
    before = request_count(port, "ListGroups")
    wait_until(lambda: request_count(port, "ListGroups") >= before + rounds, f"{rounds} more group sync passes")


def group_offsets(bootstrap: str, group: str, timeout_s: float = 30) -> dict[int, tuple[int, str]]:
    """partition of TOPIC -> (committed offset, metadata), through confluent-kafka's Admin."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(group, [TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    result = admin.list_consumer_group_offsets([request])[group].result(timeout_s)
    return {tp.partition: (tp.offset, tp.metadata or "") for tp in result.topic_partitions if tp.offset >= 0}


def consume_and_commit(bootstrap: str, group: str, counts: dict[int, int], metadata: str) -> dict[int, int]:
    """Consume `counts[p]` more records of each partition as `group` and commit the next
    offsets with `metadata`; returns them."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        committed = {tp.partition: tp.offset for tp in consumer.committed(
            [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)}
        starts = {p: max(committed[p], 0) for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(TOPIC, p, starts[p]) for p in range(PARTITIONS)])
        nexts = dict(starts)
        deadline = time.monotonic() + 60
        while any(nexts[p] < starts[p] + counts[p] for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, "consuming at the source timed out"
            msg = consumer.poll(1.0)
            if msg is None or msg.error() is not None:
                continue
            p = msg.partition()
            if msg.offset() < starts[p] + counts[p]:
                assert msg.offset() == nexts[p]
                nexts[p] = msg.offset() + 1
                if nexts[p] == starts[p] + counts[p]:
                    consumer.pause([TopicPartition(TOPIC, p)])
        consumer.commit(offsets=[TopicPartition(TOPIC, p, nexts[p], metadata=metadata) for p in range(PARTITIONS)],
                        asynchronous=False)
        return nexts
    finally:
        consumer.close()


def acl(principal: str, operation: AclOperation) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, principal, "*", operation,
                      AclPermissionType.ALLOW)


def all_acls(bootstrap: str) -> list[AclBinding]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    return list(admin.describe_acls(flt).result(30))


def test_group_offsets_and_acls_follow_the_source_and_failover_resumes_exactly(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC,
            "--partitions", str(PARTITIONS), "--replication-factor", "1")
    producer = Producer({"bootstrap.servers": source.bootstrap, "enable.idempotence": True})
    for p in range(PARTITIONS):
        for i in range(RECORDS):
            producer.produce(TOPIC, value=f"p{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0
    alice, bob = acl("User:alice", AclOperation.READ), acl("User:bob", AclOperation.WRITE)
    source_admin = AdminClient({"bootstrap.servers": source.bootstrap})
    for binding in (alice, bob):
        source_admin.create_acls([binding])[binding].result(30)

    create_mirror(dest, source, MIRROR, TOPIC, tmp_path / "mirror.properties",
                  {"mirror.groups.include": "app-.*", "mirror.acl.include": "TOPIC;*;*;ALLOW;User:alice"})

    # Offsets of an included group appear at the destination, metadata included; an
    # excluded group's do not.
    first = consume_and_commit(source.bootstrap, "app-1", {0: 30, 1: 17}, "first")
    consume_and_commit(source.bootstrap, "other-1", {0: 5, 1: 5}, "other")
    expected = {p: (first[p], "first") for p in range(PARTITIONS)}
    # The first ListConsumerGroupOffsets at the destination makes it create and load
    # __consumer_offsets: its FindCoordinator answer waits for the load rather than spend
    # librdkafka's few retries (which left the request hanging for its whole timeout).
    wait_until(lambda: group_offsets(dest.bootstrap, "app-1") == expected, "app-1's offsets at the destination")
    assert group_offsets(source.bootstrap, "app-1") == expected

    # Every refresh: a later commit at the source follows.
    second = consume_and_commit(source.bootstrap, "app-1", {0: 11, 1: 23}, "second")
    expected = {p: (second[p], "second") for p in range(PARTITIONS)}
    wait_until(lambda: group_offsets(dest.bootstrap, "app-1") == expected, "app-1's later offsets")
    wait_sync_rounds(source)
    assert group_offsets(dest.bootstrap, "other-1") == {}
    assert group_offsets(source.bootstrap, "other-1") != {}

    # ACLs: the included binding is created at the destination, the excluded one is not.
    wait_until(lambda: alice in all_acls(dest.bootstrap), "alice's ACL at the destination")
    assert bob not in all_acls(dest.bootstrap)
    assert bob in all_acls(source.bootstrap)

    # Failover once the data is there; the same group resumes at the destination exactly.
    wait_until(lambda: set(partition_states(dest.bootstrap, TOPIC).values()) == {"MIRRORING"}, "partitions MIRRORING")
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", ".*")
    wait_until(lambda: set(partition_states(dest.bootstrap, TOPIC).values()) == {"STOPPED"}, "partitions STOPPED")
    consumer = Consumer({"bootstrap.servers": dest.bootstrap, "group.id": "app-1", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    read: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 60
        while sum(len(v) for v in read.values()) < PARTITIONS * RECORDS - sum(second.values()):
            assert time.monotonic() < deadline, f"resumed consumer read only {read}"
            msg = consumer.poll(1.0)
            if msg is None or msg.error() is not None:
                continue
            read[msg.partition()].append((msg.offset(), msg.value()))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    for p in range(PARTITIONS):
        assert read[p] == [(o, f"p{p}-{o}".encode()) for o in range(second[p], RECORDS)]
    after_failover = group_offsets(dest.bootstrap, "app-1")
    # the consumer's own commit (past a failover control record where one was written)
    assert sorted(after_failover) == list(range(PARTITIONS))
    assert all(offset >= RECORDS and metadata == "" for offset, metadata in after_failover.values())

    # The topic left the mirror: the source group's later commits are no longer synced.
    consume_and_commit(source.bootstrap, "app-1", {0: 1, 1: 1}, "third")
    time.sleep(2)  # four refreshes
    assert group_offsets(dest.bootstrap, "app-1") == after_failover
