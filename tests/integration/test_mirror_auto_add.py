"""Topics joining a mirror by pattern on real processes (`mirror.topics.include`, MirrorMaker
2's `topics` regex): source topics matching it, existing or created later, are created at the
destination with the source's topic id, partition count and configs and mirrored byte for
byte at the next metadata refresh; others are not; a topic the destination already has under
a matching name stays the destination's own and writable."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaException

from kmirror.testing.kafka_clients import create_topic, end_offsets, produce_acked, produce_delivered
from kmirror.testing.mirror_clusters import (
    create_mirror,
    describe,
    partition_states,
    topic_summary,
    wait_until,
)
from kmirror.testing.processes import LocalCluster, kmirror
from kmirror.testing.segments import log_batches

pytestmark = pytest.mark.integration


@pytest.fixture
def dest_overrides() -> dict[str, str]:
    return {"mirror.metadata.refresh.interval.ms": "500"}


def topics(bootstrap: str) -> set[str]:
    out = kmirror("topics", "--bootstrap-server", bootstrap, "--list").stdout
    return {line.strip() for line in out.splitlines() if line.strip()}


def mirrored(source: LocalCluster, dest: LocalCluster, topic: str, partitions: int) -> None:
    wait_until(lambda: topic in topics(dest.bootstrap), f"{topic} created at the destination")
    ends = end_offsets(source.bootstrap, topic, partitions)
    wait_until(lambda: end_offsets(dest.bootstrap, topic, partitions) == ends, f"{topic} mirrored",
               retry_on=(KafkaException,))
    wait_until(lambda: set(partition_states(dest.bootstrap, topic).values()) == {"MIRRORING"}, f"{topic} MIRRORING")
    for p in range(partitions):
        assert log_batches(dest, topic, p) == log_batches(source, topic, p)
    assert topic_summary(dest.bootstrap, topic)["TopicId"] == topic_summary(source.bootstrap, topic)["TopicId"]


def test_source_topics_matching_the_pattern_join_the_mirror_at_the_next_refresh(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    create_topic(source.bootstrap, "orders.eu", 2)
    create_topic(source.bootstrap, "audit", 1)
    create_topic(source.bootstrap, "orders.local", 1)
    create_topic(dest.bootstrap, "orders.local", 1)  # the destination's own topic of that name
    for topic, partitions in (("orders.eu", 2), ("audit", 1), ("orders.local", 1)):
        produce_acked(source.bootstrap, topic, 20, partitions)

    create_mirror(dest, source, "m", None, tmp_path / "mirror.properties", {"mirror.topics.include": r"orders\..*"})
    mirrored(source, dest, "orders.eu", 2)

    # Created at the source later, with a config: it joins too, configs copied.
    create_topic(source.bootstrap, "orders.us", 3, config={"retention.ms": "123456789"})
    produce_acked(source.bootstrap, "orders.us", 30, 3)
    mirrored(source, dest, "orders.us", 3)
    assert "retention.ms=123456789" in topic_summary(dest.bootstrap, "orders.us")["Configs"]
    assert "added topic(s) matching mirror.topics.include: orders.us" in dest.log_text()

    # Refreshes ran since: the non-matching topic never came, the destination's own stays its own.
    assert "audit" not in topics(dest.bootstrap)
    assert "mirror.name" not in topic_summary(dest.bootstrap, "orders.local")["Configs"]
    assert all(topic != "orders.local" for _, topic, _ in describe(dest.bootstrap))
    delivered = produce_delivered({"bootstrap.servers": dest.bootstrap}, "orders.local", [(0, b"k", b"mine")])
    assert delivered == [(0, 0)]

