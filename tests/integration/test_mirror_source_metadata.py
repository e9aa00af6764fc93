"""What a mirror asks its source cluster for: `ClientSourceCluster` against a real node, each
Metadata request counted on the client (`Cluster.refresh`, called through). A pass that
starts thousands of partitions shares one load; a topic id check names its topic alone; the
cluster id check names no topic."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import pytest

from kmirror.client.metadata import ClusterMetadata
from kmirror.mirror.fetcher.source_endpoint import ClientSourceCluster
from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster, free_port_block
from kmirror.types import TopicPartition

pytestmark = pytest.mark.integration
T = TypeVar("T")


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    c = LocalCluster(dir=tmp_path_factory.mktemp("source") / "cluster", port=free_port_block())
    c.up()
    try:
        create_topic(c.bootstrap, "t", 3)
        create_topic(c.bootstrap, "u", 1)
        wait_until(lambda: run_with(c.bootstrap, leaders_known), "leaders of t and u")
        yield c.bootstrap
    finally:
        c.down()


async def leaders_known(s: ClientSourceCluster) -> bool:
    tps = [TopicPartition("t", p) for p in range(3)] + [TopicPartition("u", 0)]
    return all([await s.partition_leader(tp, refresh=True) is not None for tp in tps])


def run_with(bootstrap: str, use: Callable[[ClientSourceCluster], Awaitable[T]],
             asked: list[list[str] | None] | None = None) -> T:
    """`use` a fresh source cluster client, recording in `asked` the topics of every Metadata
    request it sends (None: every topic)."""
    async def run() -> T:
        s = ClientSourceCluster(bootstrap, client_id="mirror")
        refresh = s.cluster.refresh

        async def counted(topics: list[str] | None = None) -> ClusterMetadata:
            if asked is not None:
                asked.append(None if topics is None else list(topics))
            return await refresh(topics)

        s.cluster.refresh = counted  # type: ignore[method-assign]
        try:
            return await use(s)
        finally:
            await s.close()
    return asyncio.run(run())


def test_leader_lookups_made_together_share_one_metadata_request(bootstrap: str) -> None:
    asked: list[list[str] | None] = []

    async def lookups(s: ClientSourceCluster) -> list[Any]:
        return await asyncio.gather(*(s.partition_leader(TopicPartition("t", p % 3)) for p in range(3000)))

    leaders = run_with(bootstrap, lookups, asked)
    assert asked == [None]
    assert len({(leader.host, leader.port) for leader in leaders}) == 1


def test_a_failed_first_lookup_fails_every_waiter_once_and_the_next_lookup_asks_again() -> None:
    nothing_listens = f"127.0.0.1:{free_port_block()}"
    asked: list[list[str] | None] = []

    async def twice(s: ClientSourceCluster) -> tuple[list[Any], list[Any]]:
        async def round_() -> list[Any]:
            return await asyncio.gather(*(s.partition_leader(TopicPartition("t", 0)) for _ in range(100)),
                                        return_exceptions=True)
        first = await round_()
        return first, await round_()

    first, second = run_with(nothing_listens, twice, asked)
    assert asked == [None, None]  # one request per round, not one per lookup
    assert all(isinstance(o, Exception) for o in first + second)


def test_topic_id_asks_for_that_topic_alone_and_cluster_id_for_no_topic(bootstrap: str) -> None:
    asked: list[list[str] | None] = []

    async def ids(s: ClientSourceCluster) -> tuple[Any, Any, str]:
        return await s.topic_id("t"), await s.topic_id("gone"), await s.cluster_id(refresh=True)

    t_id, gone_id, cluster_id = run_with(bootstrap, ids, asked)
    assert t_id is not None and gone_id is None and cluster_id
    assert asked == [["t"], ["gone"], []]


@pytest.mark.parametrize("refresh", [False, True])
def test_a_refreshed_leader_lookup_asks_for_every_topic(bootstrap: str, refresh: bool) -> None:
    asked: list[list[str] | None] = []

    async def twice(s: ClientSourceCluster) -> None:
        await s.partition_leader(TopicPartition("u", 0))
        await s.partition_leader(TopicPartition("u", 0), refresh=refresh)

    run_with(bootstrap, twice, asked)
    assert asked == ([None, None] if refresh else [None])
