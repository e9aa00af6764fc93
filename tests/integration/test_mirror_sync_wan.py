"""The mirror's metadata sync of many groups and topics across a slow link, with real processes.

The destination reaches the source only through a link that adds 50 ms each way. Hundreds of
source groups, or dozens of mirrored topics, must not cost a round trip each per sync pass: at
100 ms a round trip that is a minute for 600 groups, while the offsets a failover resumes from
grow stale, and topic configs and partition counts trail the source.
- Groups: the sync asks the source for every group's offsets in a request per coordinator and
  up to 256 groups (OffsetFetch v8, KIP-709; coordinators found with one FindCoordinator v4,
  KIP-699), as Kafka's Admin does.
- Topics: one Metadata and one DescribeConfigs for every mirrored topic of a pass.
- Adding topics: a hundred topics added together start with a few requests of each kind (the
  topic ids, the last mirrored epochs), not one or two a topic.
The source's request counters show it, and every group's offsets and every topic's config
arrive."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient

from kmirror.client.admin import LATEST_TIMESTAMP, Admin, AlterConfigOp, ConfigResourceType, NewTopic
from kmirror.client.errors import KafkaError
from kmirror.client.groups import OffsetAndMetadata
from kmirror.testing.link import Link
from kmirror.testing.metrics_scrape import request_count
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.types import TopicPartition as TP

pytestmark = pytest.mark.integration

TOPIC = "events"
PARTITIONS = 2
GROUPS = [f"app-{i:04d}" for i in range(600)]


@pytest.fixture
def linked(tmp_path: Path) -> Iterator[tuple[LocalCluster, LocalCluster]]:
    source = LocalCluster(dir=tmp_path / "source", port=free_port_block(1), link_port=free_port_block(2),
                          overrides={"metrics.port": str(free_port_block())})
    dest = LocalCluster(dir=tmp_path / "dest", port=free_port_block(1),
                        overrides={"mirror.metadata.refresh.interval.ms": "500"})
    with clusters_up(source, dest), Link(source.link_routes(), delay_ms=50):
        yield source, dest


def offsets(offset: int) -> dict[TP, OffsetAndMetadata]:
    return {TP(TOPIC, p): OffsetAndMetadata(offset, metadata=f"m{offset}") for p in range(PARTITIONS)}


async def commit_all(bootstrap: str, offset: int) -> None:
    async with await Admin.connect(bootstrap) as admin:
        results = await admin.alter_consumer_groups_offsets({g: offsets(offset) for g in GROUPS})
    assert all(not isinstance(r, Exception) and not any(r.values()) for r in results.values()), results


async def groups_at(bootstrap: str, offset: int) -> int:
    """How many groups hold `offset` on every partition."""
    async with await Admin.connect(bootstrap) as admin:
        answers = await admin.list_consumer_groups_offsets(GROUPS)
    return sum(answers[g] == offsets(offset) for g in GROUPS)


def test_hundreds_of_groups_sync_in_a_few_requests_per_pass(linked: tuple[LocalCluster, LocalCluster],
                                                             tmp_path: Path) -> None:
    source, dest = linked
    metrics = int(source.overrides["metrics.port"])
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC,
            "--partitions", str(PARTITIONS), "--replication-factor", "1")
    asyncio.run(commit_all(source.bootstrap, 1))
    assert asyncio.run(groups_at(source.bootstrap, 1)) == len(GROUPS)
    create_mirror(dest, source.link_bootstrap, "m", TOPIC, tmp_path / "mirror.properties")
    wait_until(lambda: asyncio.run(groups_at(dest.bootstrap, 1)) == len(GROUPS), "every group synced",
               seen=lambda: asyncio.run(groups_at(dest.bootstrap, 1)))

    asyncio.run(commit_all(source.bootstrap, 2))  # the next pass commits every group's new offsets
    before = {api: request_count(metrics, api) for api in ("ListGroups", "OffsetFetch", "FindCoordinator")}
    wait_until(lambda: asyncio.run(groups_at(dest.bootstrap, 2)) == len(GROUPS), "every group's new offsets")
    wait_until(lambda: request_count(metrics, "ListGroups") >= before["ListGroups"] + 3, "3 more sync passes")
    passes = request_count(metrics, "ListGroups") - before["ListGroups"]
    fetches = request_count(metrics, "OffsetFetch") - before["OffsetFetch"]
    lookups = request_count(metrics, "FindCoordinator") - before["FindCoordinator"]
    print(f"{passes:.0f} passes: {fetches:.0f} OffsetFetch, {lookups:.0f} FindCoordinator")
    # 600 groups, one coordinator: 3 OffsetFetch and 1 FindCoordinator a pass (one more pass
    # may have started before the count ended), where a request a group made 600 of each
    assert fetches <= 3 * (passes + 1), (fetches, passes)
    assert lookups <= passes + 1, (lookups, passes)

    admin = KafkaAdminClient(bootstrap_servers=dest.bootstrap)  # kafka-python batches OffsetFetch v8 too
    try:
        seen = admin.list_group_offsets(GROUPS)
    finally:
        admin.close()
    assert {g: sorted((tp.partition, om.offset, om.metadata) for tp, om in seen[g].items()) for g in GROUPS} == {
        g: [(p, 2, "m2") for p in range(PARTITIONS)] for g in GROUPS}


def test_dozens_of_topics_sync_their_configs_in_two_requests_per_pass(linked: tuple[LocalCluster, LocalCluster],
                                                                     tmp_path: Path) -> None:
    source, dest = linked
    metrics = int(source.overrides["metrics.port"])
    topics = [f"table-{i:02d}" for i in range(40)]

    async def create_and_set(retention_ms: int | None) -> None:
        async with await Admin.connect(source.bootstrap) as admin:
            if retention_ms is None:
                await admin.create_topics([NewTopic(t, 1, 1) for t in topics])
                return
            for t in topics:
                await admin.incremental_alter_configs(ConfigResourceType.TOPIC, t,
                                                      [("retention.ms", AlterConfigOp.SET, str(retention_ms))])

    def retention_at_dest() -> set[str | None]:
        async def read() -> set[str | None]:
            async with await Admin.connect(dest.bootstrap) as admin:
                found = await admin.describe_configs_results(ConfigResourceType.TOPIC, topics, ["retention.ms"])
            return {None if isinstance(v, Exception) else {e.name: e.value for e in v}.get("retention.ms")
                    for v in found.values()}
        return asyncio.run(read())

    asyncio.run(create_and_set(None))
    create_mirror(dest, source.link_bootstrap, "m", "table-.*", tmp_path / "mirror.properties")
    asyncio.run(create_and_set(3_600_000))
    wait_until(lambda: retention_at_dest() == {"3600000"}, "every topic's retention.ms at the destination",
               seen=retention_at_dest)

    before = {api: request_count(metrics, api) for api in ("DescribeAcls", "DescribeConfigs")}
    wait_until(lambda: request_count(metrics, "DescribeAcls") >= before["DescribeAcls"] + 3, "3 more passes")
    passes = request_count(metrics, "DescribeAcls") - before["DescribeAcls"]  # the ACL sync's, one a pass
    described = request_count(metrics, "DescribeConfigs") - before["DescribeConfigs"]
    print(f"{passes:.0f} passes (DescribeAcls): {described:.0f} DescribeConfigs")
    assert described <= passes + 1, (described, passes)  # one a pass; a request per topic made 40


def test_a_hundred_topics_added_together_start_mirroring_with_a_few_requests(
        linked: tuple[LocalCluster, LocalCluster], tmp_path: Path) -> None:
    source, dest = linked
    metrics = int(source.overrides["metrics.port"])
    topics = [f"feed-{i:03d}" for i in range(100)]

    async def create_and_fill() -> None:
        async with await Admin.connect(source.bootstrap) as admin:
            await admin.create_topics([NewTopic(t, 1, 1) for t in topics])
        producer = Producer({"bootstrap.servers": source.bootstrap})
        for t in topics:
            producer.produce(t, b"first")
        assert producer.flush(30) == 0

    async def mirrored() -> int:
        async with await Admin.connect(dest.bootstrap) as admin:
            ends = await admin.list_offsets({TP(t, 0): LATEST_TIMESTAMP for t in topics})
        return sum(ends[TP(t, 0)].offset == 1 for t in topics)

    asyncio.run(create_and_fill())
    create_mirror(dest, source.link_bootstrap, "m", None, tmp_path / "mirror.properties")
    apis = ("Metadata", "DescribeMirrors", "DescribeConfigs", "DescribeAcls")
    before = {api: request_count(metrics, api) for api in apis}
    started = time.monotonic()
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", "m", "--topic", "feed-.*")
    wait_until(lambda: asyncio.run(mirrored()) == len(topics), "every topic's first record at the destination",
               seen=lambda: asyncio.run(mirrored()), retry_on=(KafkaError,))
    took = time.monotonic() - started
    sent = {api: request_count(metrics, api) - before[api] for api in apis}
    print(f"{len(topics)} topics mirroring {took:.1f} s after --add (100 ms round trips): {sent}")
    # one a topic (or two) before: 200 Metadata and 100 DescribeMirrors
    assert sent["DescribeMirrors"] <= 5 and sent["Metadata"] <= 5 + 2 * sent["DescribeAcls"], sent
