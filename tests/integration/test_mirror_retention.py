"""The source's retention followed by the mirror, on real processes (KIP-1279 "Topic
Retention").

Two source topics lose their oldest segments while their mirror is PAUSED, one by
`retention.ms` and one by `retention.bytes`, until the source's log start passes the
destination's log end. On `--resume` the mirror leader's fetch is OFFSET_OUT_OF_RANGE: it
truncates to the source's log start and continues, so the destination holds exactly the
source's batches, byte for byte at the same offsets, from the same log start. While
mirroring, a further retention pass at the source moves the destination's log start through
the Fetch answers' log start offset.

The mirror excludes the retention and segment configs from topic config sync, so the
destination never deletes a segment by its own retention: every log start move seen at the
destination is the mirror following the source.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from kmirror.config.mirror import DEFAULT_TOPIC_PROPERTIES_EXCLUDE
from kmirror.testing.kafka_clients import create_topic, watermarks
from kmirror.testing.mirror_clusters import create_mirror, partition_states, wait_until
from kmirror.testing.processes import LocalCluster, kmirror
from kmirror.testing.segments import log_batches

pytestmark = pytest.mark.integration

BY_TIME, BY_SIZE = "aged", "sized"
TOPICS = (BY_TIME, BY_SIZE)
SEGMENT = {"segment.bytes": "2048"}
EXCLUDE = ",".join((*DEFAULT_TOPIC_PROPERTIES_EXCLUDE, "retention.ms", "retention.bytes", "segment.bytes"))


@pytest.fixture
def cluster_overrides() -> dict[str, str]:
    return {"mirror.metadata.refresh.interval.ms": "500", "log.retention.check.interval.ms": "300"}


def produce(bootstrap: str, topic: str, n: int, prefix: str) -> None:
    """`n` records acked, in batches well under `segment.bytes` (a larger batch is
    RECORD_LIST_TOO_LARGE, as in Kafka)."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 1, "batch.size": 512})
    errors: list[object] = []
    for i in range(n):
        producer.produce(topic, value=f"{prefix}-{i}".ljust(40, ".").encode(), partition=0,
                         on_delivery=lambda err, _msg: errors.append(err) if err is not None else None)
    assert producer.flush(30) == 0 and not errors, errors


def set_topic_config(bootstrap: str, topic: str, name: str, value: str | None) -> None:
    """IncrementalAlterConfigs SET (or DELETE when `value` is None) of one topic config."""
    op = AlterConfigOpType.DELETE if value is None else AlterConfigOpType.SET
    resource = ConfigResource("topic", topic, incremental_configs=[ConfigEntry(name, value or "", incremental_operation=op)])
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the answer arrives
    admin.incremental_alter_configs([resource])[resource].result(30)


def offsets(bootstrap: str, topic: str) -> tuple[int, int]:
    """(log start offset, high watermark) of partition 0."""
    return watermarks(bootstrap, topic, 0)


def retained_batches(cluster: LocalCluster, topic: str) -> list[tuple[int, bytes]]:
    """The batches from the log start offset on (a segment may still hold batches below a log
    start that moved inside it; they are no longer the log's)."""
    start = offsets(cluster.bootstrap, topic)[0]
    return [b for b in log_batches(cluster, topic, 0) if b[0] >= start]


def same_log(source: LocalCluster, dest: LocalCluster, topic: str) -> Callable[[], bool]:
    def check() -> bool:
        batches = retained_batches(source, topic)
        return bool(batches) and offsets(dest.bootstrap, topic) == offsets(source.bootstrap, topic) \
            and retained_batches(dest, topic) == batches
    return check


def wait_same(source: LocalCluster, dest: LocalCluster, topic: str, what: str) -> None:
    wait_until(same_log(source, dest, topic), what, retry_on=(KafkaException,),
               seen=lambda: (offsets(source.bootstrap, topic), offsets(dest.bootstrap, topic),
                             [b[0] for b in log_batches(source, topic, 0)][:3],
                             [b[0] for b in log_batches(dest, topic, 0)][:3]))


def test_the_mirror_follows_the_source_log_start_advanced_by_retention_while_paused_and_while_mirroring(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    for topic in TOPICS:
        create_topic(source.bootstrap, topic, config=SEGMENT)
        produce(source.bootstrap, topic, 60, f"{topic}-a")
    create_mirror(dest, source, "m", None, tmp_path / "mirror.properties",
                  {"mirror.topic.properties.exclude": EXCLUDE})
    for topic in TOPICS:
        kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", "m", "--topic", topic)
    for topic in TOPICS:
        wait_same(source, dest, topic, f"{topic} mirrored")
        assert offsets(dest.bootstrap, topic)[0] == 0

    # Paused: the source writes on and retention deletes past the destination's log end.
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--pause", "--topic", "aged|sized")
    wait_until(lambda: all(partition_states(dest.bootstrap, t) == {0: "PAUSED"} for t in TOPICS), "PAUSED")
    paused_end = {t: offsets(dest.bootstrap, t)[1] for t in TOPICS}
    for topic in TOPICS:
        produce(source.bootstrap, topic, 200, f"{topic}-b")
    set_topic_config(source.bootstrap, BY_TIME, "retention.ms", "1000")
    set_topic_config(source.bootstrap, BY_SIZE, "retention.bytes", "2048")
    for topic in TOPICS:
        wait_until(lambda t=topic: offsets(source.bootstrap, t)[0] > paused_end[t],  # type: ignore[misc]
                   f"{topic}: the source's log start past the paused destination's log end {paused_end[topic]}",
                   timeout_s=60, seen=lambda t=topic: offsets(source.bootstrap, t))  # type: ignore[misc]
        # Retention stops here, so the source's log holds still while the mirror catches up.
        set_topic_config(source.bootstrap, topic, "retention.ms" if topic == BY_TIME else "retention.bytes", None)
    assert all(offsets(dest.bootstrap, t) == (0, paused_end[t]) for t in TOPICS)  # nothing moved while paused
    for topic in TOPICS:  # retention.ms may have emptied the log (the active segment too, as in Kafka)
        produce(source.bootstrap, topic, 20, f"{topic}-d")

    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--resume", "--topic", "aged|sized")
    for topic in TOPICS:
        wait_same(source, dest, topic, f"{topic}: truncated to the source's log start and mirrored on")
        start, end = offsets(dest.bootstrap, topic)
        assert paused_end[topic] < start < end
        assert log_batches(dest, topic, 0)[0][0] == start
    assert all(partition_states(dest.bootstrap, t) == {0: "MIRRORING"} for t in TOPICS)

    # Mirroring: the source's log start moves again and the destination's follows it.
    before = {t: offsets(source.bootstrap, t)[0] for t in TOPICS}
    for topic in TOPICS:
        produce(source.bootstrap, topic, 100, f"{topic}-c")
    wait_until(lambda: all(same_log(source, dest, t)() for t in TOPICS), "caught up", retry_on=(KafkaException,))
    set_topic_config(source.bootstrap, BY_TIME, "retention.ms", "1000")
    set_topic_config(source.bootstrap, BY_SIZE, "retention.bytes", "2048")
    for topic in TOPICS:
        wait_until(lambda t=topic: offsets(source.bootstrap, t)[0] > before[t],  # type: ignore[misc]
                   f"{topic}: retention at the source again", timeout_s=60)
        set_topic_config(source.bootstrap, topic, "retention.ms" if topic == BY_TIME else "retention.bytes", None)
    for topic in TOPICS:
        produce(source.bootstrap, topic, 20, f"{topic}-e")
        wait_same(source, dest, topic, f"{topic}: the destination's log start follows while mirroring")
        assert offsets(dest.bootstrap, topic)[0] > before[topic]
