"""KIP-1279 "Topic Compaction" on real processes: a compacted source topic mirrors with its
offsets and gaps and the source's cleaned batches byte for byte; the destination's own cleaner
leaves the mirror topic alone while it is read-only (it stays a copy of what the source
served), and compacts it once failover makes it a writable topic of the destination."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource

from kmirror.testing.kafka_clients import create_topic, end_offsets
from kmirror.testing.mirror_clusters import create_mirror, describe, wait_until
from kmirror.testing.processes import LocalCluster, kmirror
from kmirror.testing.segments import headers, log_batches

pytestmark = pytest.mark.integration

TOPIC = "changelog"
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"}


@pytest.fixture
def cluster_overrides() -> dict[str, str]:
    return {"log.cleaner.backoff.ms": "200"}


def overwrite(bootstrap: str, topic: str, rounds: int, tag: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1024})
    for i in range(rounds):
        producer.produce(topic, key=f"key-{i % 10}".encode(), value=f"{tag}-{i}-".encode() * 10, partition=0)
    assert producer.flush(30) == 0


def cleaned_rounds(cluster: LocalCluster, topic: str) -> int:
    return len(re.findall(rf"cleaned {re.escape(topic)}-0 ", cluster.log_text()))


def record_count(cluster: LocalCluster, topic: str) -> int:
    return sum(h.records_count for h in headers(log_batches(cluster, topic, 0)))


def test_compacted_source_mirrors_byte_identical_and_the_destination_cleans_only_after_failover(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    create_topic(source.bootstrap, TOPIC, config=COMPACTED)
    overwrite(source.bootstrap, TOPIC, 300, "a")
    wait_until(lambda: cleaned_rounds(source, TOPIC) > 0, "the source cleaned the topic")

    create_mirror(dest, source, "m", TOPIC, tmp_path / "mirror.properties")
    source_end = end_offsets(source.bootstrap, TOPIC, 1)
    wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, 1) == source_end, "the mirror caught up")
    wait_until(lambda: log_batches(dest, TOPIC, 0) == log_batches(source, TOPIC, 0),
               "the source's cleaned batches copied byte for byte, gaps included")
    admin = AdminClient({"bootstrap.servers": dest.bootstrap})
    resource = ConfigResource("topic", TOPIC)
    assert admin.describe_configs([resource])[resource].result(30)["cleanup.policy"].value == "compact"

    # More overwrites: the mirror copies them; a local compacted topic on the destination
    # shows its cleaner running twice, and the mirror topic (dirtier) is never picked.
    overwrite(source.bootstrap, TOPIC, 300, "b")
    source_end = end_offsets(source.bootstrap, TOPIC, 1)
    wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, 1) == source_end, "the mirror caught up again")
    create_topic(dest.bootstrap, "local", config=COMPACTED)
    overwrite(dest.bootstrap, "local", 300, "l")
    wait_until(lambda: cleaned_rounds(dest, "local") >= 1, "the destination cleaned its own topic")
    overwrite(dest.bootstrap, "local", 300, "m")
    wait_until(lambda: cleaned_rounds(dest, "local") >= 2, "the destination cleaned its own topic again")
    assert cleaned_rounds(dest, TOPIC) == 0
    mirrored = record_count(dest, TOPIC)
    assert mirrored > 20

    # Failover: the topic leaves the mirror, becomes writable, and the destination compacts it.
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", TOPIC)
    wait_until(lambda: {row[3] for row in describe(dest.bootstrap).values()} == {"STOPPED"}, "partition STOPPED")
    overwrite(dest.bootstrap, TOPIC, 100, "c")  # fills the active segment so the mirrored ones are cleanable
    wait_until(lambda: cleaned_rounds(dest, TOPIC) >= 1, "the destination cleaned the former mirror topic")
    wait_until(lambda: record_count(dest, TOPIC) < mirrored, "superseded mirrored records removed")
