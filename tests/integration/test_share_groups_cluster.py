"""Share groups on three brokers: each share partition lives on its partition's leader, so a
member fetches from every leader; after kill -9 of a leader the new leader loads the share
partition's state from the group's coordinator (`__consumer_offsets`, RF=3), so every record
is delivered and none that was acknowledged is delivered again."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import pytest

from kmirror.testing.kafka_clients import create_topic, leaders_and_isr_sizes
from kmirror.testing.processes import FAST_FAILURE_DETECTION, LocalCluster, free_port_block
from kmirror.testing.share_consumers import earliest, poll_until, produce, share_consumer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(dir=tmp_path_factory.mktemp("share3"), port=free_port_block(3), nodes=3,
                      overrides={**FAST_FAILURE_DETECTION, "group.share.heartbeat.interval.ms": "1000",
                                 "offsets.topic.replication.factor": "3"}) as c:
        yield c


def test_members_fetch_from_every_leader_and_survive_a_leader_kill(cluster: LocalCluster) -> None:
    create_topic(cluster.bootstrap, "work", partitions=3, replication_factor=3)
    earliest(cluster.bootstrap, "crew")
    leaders = {leader for leader, _ in leaders_and_isr_sizes(cluster.bootstrap, "work").values()}
    assert len(leaders) > 1  # the partitions are led by several brokers
    produced = produce(cluster.bootstrap, "work", 300, 3, "lz4")
    consumers = [share_consumer(cluster.bootstrap, "crew", "work") for _ in range(2)]
    seen: Counter[tuple[int, int]] = Counter()
    try:
        poll_until(consumers, seen, len(produced))
        for consumer in consumers:  # the last poll's records accepted before the kill
            consumer.commit_sync(30)
        assert max(seen.values()) == 1
        victim = leaders_and_isr_sizes(cluster.bootstrap, "work")[0][0]
        cluster.kill9(victim)
        deadline = time.monotonic() + 60
        while leaders_and_isr_sizes(cluster.bootstrap, "work")[0][0] in (victim, -1):
            assert time.monotonic() < deadline, "no new leader for work-0"
            time.sleep(0.2)
        more = produce(cluster.bootstrap, "work", 150, 3, "none")
        poll_until(consumers, seen, len(produced) + len(more), timeout_s=90)
    finally:
        for consumer in consumers:
            consumer.close()
    assert set(seen) == produced | more
    assert max(seen.values()) == 1, sorted(k for k, v in seen.items() if v > 1)
