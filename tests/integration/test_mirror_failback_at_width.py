"""Failback of many partitions with real processes: the old source (A), mirroring back from
the cluster it failed over to (B), resolves each partition's divergence with B (KIP "Log
Convergence": OffsetsForLeaderEpoch after the LME truncation) in one OffsetsForLeaderEpoch
per B leader for the partitions starting together, on one connection, not with a connection
and a request of its own per partition (a failback of thousands of partitions opened
thousands of connections to B at once). B's request counters show it, and A converges."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kmirror.client.admin import LATEST_TIMESTAMP, Admin, NewTopic
from kmirror.client.errors import KafkaError
from kmirror.testing.metrics_scrape import request_count
from kmirror.testing.mirror_clusters import create_mirror, partition_states, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.types import TopicPartition

pytestmark = pytest.mark.integration

TOPIC, PARTITIONS = "ledger", 100


@pytest.fixture
def cluster_overrides() -> dict[str, str]:
    return {"mirror.metadata.refresh.interval.ms": "1000"}


@pytest.fixture
def dest_overrides() -> dict[str, str]:
    return {"metrics.port": str(free_port_block())}


def produce(bootstrap: str, tag: bytes) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in range(PARTITIONS):
        producer.produce(TOPIC, tag, partition=p)
    assert producer.flush(30) == 0


def ends(bootstrap: str) -> list[int]:
    async def read() -> list[int]:
        async with await Admin.connect(bootstrap) as admin:
            got = await admin.list_offsets({TopicPartition(TOPIC, p): LATEST_TIMESTAMP for p in range(PARTITIONS)})
        return [got[TopicPartition(TOPIC, p)].offset for p in range(PARTITIONS)]
    return asyncio.run(read())


def test_a_failback_of_a_hundred_partitions_asks_the_other_cluster_a_few_requests(
        clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path) -> None:
    a, b = clusters
    metrics = int(b.overrides["metrics.port"])

    async def create() -> None:
        async with await Admin.connect(a.bootstrap) as admin:
            await admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])

    asyncio.run(create())
    produce(a.bootstrap, b"at-a")
    create_mirror(b, a, "dr", TOPIC, tmp_path / "b.properties")
    at_a = ends(a.bootstrap)
    wait_until(lambda: ends(b.bootstrap) == at_a, "B mirrors A", retry_on=(KafkaError,))
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--remove", "--topic", ".*")
    wait_until(lambda: set(partition_states(b.bootstrap, TOPIC).values()) == {"STOPPED"}, "B failed over")
    produce(b.bootstrap, b"at-b")
    at_b = ends(b.bootstrap)

    apis = ("ApiVersions", "OffsetForLeaderEpoch")
    before = {api: request_count(metrics, api) for api in apis}
    create_mirror(a, b, "dr", TOPIC, tmp_path / "a.properties")  # failback: A mirrors B
    wait_until(lambda: ends(a.bootstrap) == at_b, "A converges with B", retry_on=(KafkaError,))
    sent = {api: request_count(metrics, api) - before[api] for api in apis}
    print(f"failback of {PARTITIONS} partitions: {sent}")
    # a connection and an OffsetForLeaderEpoch per partition before (about 100 of each)
    assert sent["OffsetForLeaderEpoch"] <= 5 and sent["ApiVersions"] <= 15, sent
