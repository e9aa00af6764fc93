"""KIP-1279 group offset sync of a KIP-848 consumer group: the offsets a `group.protocol=consumer`
group commits at the source appear at the destination, and after a failover the same group,
still on the consumer protocol, resumes there exactly where it stopped (the destination's
offsets-only group is upgraded to a consumer group keeping them)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupTopicPartitions,
    ConsumerGroupType,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from kmirror.testing.mirror_clusters import create_mirror, partition_states, wait_until
from kmirror.testing.processes import LocalCluster, kmirror

pytestmark = pytest.mark.integration

TOPIC, PARTITIONS, RECORDS, GROUP = "ledger", 2, 60, "app-848"


@pytest.fixture
def cluster_overrides() -> dict[str, str]:
    return {"mirror.metadata.refresh.interval.ms": "500", "group.consumer.heartbeat.interval.ms": "1000"}


def consumer_848(bootstrap: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "group.protocol": "consumer",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest"})


def committed_offsets(bootstrap: str, timeout_s: float = 10) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = ConsumerGroupTopicPartitions(GROUP, [TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    result = admin.list_consumer_group_offsets([request])[GROUP].result(timeout_s)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def read_as_group(bootstrap: str, limits: dict[int, int]) -> dict[int, list[int]]:
    """Consume as GROUP (consumer protocol) up to `limits[p]` per partition, commit, leave."""
    consumer = consumer_848(bootstrap)
    read: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 60
        while any((read[p][-1] + 1 if read[p] else -1) < limits[p] for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, (
                f"read only {read}; assigned {consumer.assignment()}, "
                f"positions {consumer.position([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])}, "
                f"watermarks {[consumer.get_watermark_offsets(TopicPartition(TOPIC, p), 5) for p in range(PARTITIONS)]}")
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None or msg.offset() >= limits[msg.partition()]:
                continue
            read[msg.partition()].append(msg.offset())
        consumer.commit(offsets=[TopicPartition(TOPIC, p, limits[p]) for p in range(PARTITIONS)],
                        asynchronous=False)
    finally:
        consumer.close()
    return read


def test_a_consumer_protocol_groups_offsets_are_mirrored_and_it_resumes_after_failover(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC,
            "--partitions", str(PARTITIONS), "--replication-factor", "1")
    producer = Producer({"bootstrap.servers": source.bootstrap, "enable.idempotence": True})
    for p in range(PARTITIONS):
        for i in range(RECORDS):
            producer.produce(TOPIC, value=b"%d" % i, partition=p)
    assert producer.flush(30) == 0
    create_mirror(dest, source, "dr", TOPIC, tmp_path / "mirror.properties", {"mirror.groups.include": "app-.*"})

    first = read_as_group(source.bootstrap, {0: 25, 1: 40})
    assert first == {0: list(range(25)), 1: list(range(40))}
    source_admin = AdminClient({"bootstrap.servers": source.bootstrap})
    listed = {g.group_id: g.type for g in source_admin.list_consumer_groups().result(30).valid}
    assert listed[GROUP] == ConsumerGroupType.CONSUMER
    wait_until(lambda: committed_offsets(dest.bootstrap) == {0: 25, 1: 40}, "the group's offsets at the destination",
               retry_on=(TimeoutError,))

    wait_until(lambda: set(partition_states(dest.bootstrap, TOPIC).values()) == {"MIRRORING"}, "partitions MIRRORING")
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", ".*")
    wait_until(lambda: set(partition_states(dest.bootstrap, TOPIC).values()) == {"STOPPED"}, "partitions STOPPED")
    resumed = read_as_group(dest.bootstrap, {0: RECORDS, 1: RECORDS})
    assert resumed == {0: list(range(25, RECORDS)), 1: list(range(40, RECORDS))}
    dest_admin = AdminClient({"bootstrap.servers": dest.bootstrap})
    described = dest_admin.describe_consumer_groups([GROUP])[GROUP].result(30)
    assert described.type == ConsumerGroupType.CONSUMER
