"""`ClientSourceCluster`'s Metadata requests: what each lookup asks the source for, and how
many requests a pass of thousands of partitions makes (`Cluster.refresh` is counted and
answered with a `ClusterMetadata` built here; `Cluster.load` is the real one)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kmirror.client.cluster import Cluster
from kmirror.client.metadata import BrokerMetadata, ClusterMetadata, PartitionMetadata, TopicMetadata
from kmirror.mirror.fetcher.source_endpoint import ClientSourceCluster
from kmirror.types import TopicPartition

TOPIC_ID = uuid.uuid4()


def answer(topics: list[str] | None) -> ClusterMetadata:
    """The source: topic "t" of 3 partitions led by broker 1, "u" of 1; `topics` None: all."""
    listed = {"t": 3, "u": 1} if topics is None else {name: {"t": 3, "u": 1}.get(name, 0) for name in topics}
    return ClusterMetadata("source-id", 1, {1: BrokerMetadata(1, "h", 9092)}, {
        name: TopicMetadata(name, TOPIC_ID if count else None, False,
                            {p: PartitionMetadata(p, 1, 0, (1,), (1,), ()) for p in range(count)}, 0 if count else 3)
        for name, count in listed.items()})


class CountingCluster(Cluster):
    """A real `Cluster` (its `load` and its caching) whose Metadata requests are counted and
    answered by `answer`."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__("h:9092")
        self.asked: list[list[str] | None] = []
        self.fail = fail

    async def refresh(self, topics: list[str] | None = None) -> ClusterMetadata:
        self.asked.append(topics)
        await asyncio.sleep(0)  # the answer comes back later: other lookups are made meanwhile
        if self.fail:
            raise ConnectionError("refused")
        fresh = answer(topics)
        if topics is None:
            self.metadata, self.loaded = fresh, True
        else:
            self.metadata = ClusterMetadata(fresh.cluster_id, fresh.controller_id, fresh.brokers,
                                            {**self.metadata.topics, **fresh.topics})
        return fresh


def source(cluster: CountingCluster) -> ClientSourceCluster:
    s = ClientSourceCluster("h:9092", client_id="mirror")
    s.cluster = cluster
    return s


def test_leader_lookups_made_together_share_one_metadata_request() -> None:
    cluster = CountingCluster()
    s = source(cluster)

    async def lookups() -> list[object]:
        return await asyncio.gather(*(s.partition_leader(TopicPartition("t", p % 3)) for p in range(3000)))

    leaders = asyncio.run(lookups())
    assert cluster.asked == [None]
    assert {getattr(leader, "broker_id", None) for leader in leaders} == {1}


def test_a_failed_first_lookup_fails_every_waiter_once_and_the_next_lookup_asks_again() -> None:
    cluster = CountingCluster(fail=True)
    s = source(cluster)

    async def lookups() -> list[object]:
        return await asyncio.gather(*(s.partition_leader(TopicPartition("t", 0)) for _ in range(100)),
                                    return_exceptions=True)

    outcomes = asyncio.run(lookups())
    assert cluster.asked == [None] and all(isinstance(o, ConnectionError) for o in outcomes)
    cluster.fail = False
    assert asyncio.run(s.partition_leader(TopicPartition("t", 0))) is not None
    assert cluster.asked == [None, None]


def test_topic_id_asks_for_that_topic_alone_and_cluster_id_for_no_topic() -> None:
    cluster = CountingCluster()
    s = source(cluster)
    assert asyncio.run(s.topic_id("t")) == TOPIC_ID
    assert asyncio.run(s.topic_id("gone")) is None  # UNKNOWN_TOPIC_OR_PARTITION: not listed
    assert asyncio.run(s.cluster_id(refresh=True)) == "source-id"
    assert cluster.asked == [["t"], ["gone"], []]


@pytest.mark.parametrize("refresh", [False, True])
def test_a_refreshed_leader_lookup_asks_for_every_topic(refresh: bool) -> None:
    cluster = CountingCluster()
    s = source(cluster)
    asyncio.run(s.partition_leader(TopicPartition("u", 0)))
    asyncio.run(s.partition_leader(TopicPartition("u", 0), refresh=refresh))
    assert cluster.asked == ([None, None] if refresh else [None])
