"""`__consumer_offsets` and `__mirror_state` stay bounded under churn, on real processes.

A destination mirroring a 24-partition topic is driven until each log has had several times
its bound written (a ten-minute soak is marked slow): an Admin client pauses
the mirror topic, waits for PAUSED, resumes it and waits for MIRRORING, in a loop (each
transition writes one `__mirror_state` record per partition: PAUSING, PAUSED, MIRRORING),
while a confluent-kafka consumer commits offsets in a loop (one `__consumer_offsets` record
per partition per commit). Both topics have one partition and 4 KiB segments
(`offsets.topic.segment.bytes`, `mirror.topic.segment.bytes`). Sampled all along, each log
stays within a bound (4 segments for `__mirror_state`; 80 for `__consumer_offsets`, written
~100 times faster) while more than twice that was written: the cleaner compacts them
(without it the logs would outgrow their bounds). Afterwards the latest state and offsets
are still there after a kill -9 and restart, so compaction kept the last value of every key.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition

from kmirror.client.admin import Admin
from kmirror.testing.kafka_clients import create_topic, end_offsets, produce_acked, watermarks
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, partition_states, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block
from kmirror.testing.segments import log_size

pytestmark = pytest.mark.integration

SEGMENT_BYTES = 4096
MIN_RECORD_BYTES = 40  # a state or offset commit record's key and value are at least this long
BOUNDS = {"__mirror_state": 4 * SEGMENT_BYTES,
          # commits arrive ~100 times faster than state changes: the cleaner trails them by more
          # segments (up to 68 measured while the whole suite runs beside it)
          "__consumer_offsets": 80 * SEGMENT_BYTES}
TOPIC, PARTITIONS, GROUP = "churned", 24, "churn"
DEST_OVERRIDES = {
    "log.cleaner.backoff.ms": "200",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.segment.bytes": str(SEGMENT_BYTES),
    "mirror.topic.num.partitions": "1",
    "mirror.topic.replication.factor": "1",
    "mirror.topic.segment.bytes": str(SEGMENT_BYTES),
    "mirror.metadata.refresh.interval.ms": "500",
}


@pytest.fixture
def churn_clusters(tmp_path: Path) -> Iterator[tuple[LocalCluster, LocalCluster]]:
    source = LocalCluster(dir=tmp_path / "source", port=free_port_block())
    dest = LocalCluster(dir=tmp_path / "dest", port=free_port_block(), overrides=DEST_OVERRIDES)
    with clusters_up(source, dest):
        yield source, dest


def committed(bootstrap: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        return [tp.offset for tp in consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)],
                                                       timeout=30)]
    finally:
        consumer.close()


class CommitChurn(threading.Thread):
    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.stop = threading.Event()
        self.commits = 0
        self.error: Exception | None = None

    def run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": GROUP, "enable.auto.commit": False})
        try:
            while not self.stop.is_set():
                offsets = [TopicPartition(TOPIC, p, self.commits + 1) for p in range(PARTITIONS)]
                consumer.commit(offsets=offsets, asynchronous=False)
                self.commits += 1
        except Exception as exc:  # reported by the test
            self.error = exc
        finally:
            consumer.close()


async def wait_state(admin: Admin, state: str) -> None:
    while True:
        parts = [p for p in await admin.describe_mirrors(["m"]) if p.topic == TOPIC]
        if len(parts) == PARTITIONS and all(p.state == state for p in parts):
            return
        await asyncio.sleep(0.05)


def written_bytes(bootstrap: str) -> dict[str, int]:
    """What each internal topic has had appended, at the records' least size."""
    return {t: watermarks(bootstrap, t, 0)[1] * MIN_RECORD_BYTES for t in BOUNDS}


async def pause_resume_churn(bootstrap: str, seconds: float, sample: list[tuple[int, int]],
                             dest: LocalCluster, until_written: float | None = None) -> int:
    """Pause and resume the mirror topic, each to its end state, for `seconds`, or until each
    log has had `until_written` times its bound appended; sample both logs' sizes as it goes.
    Returns the number of cycles."""
    cycles = 0
    async with await Admin.connect(bootstrap) as admin:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if until_written is not None and cycles and all(
                    w > until_written * BOUNDS[t] for t, w in written_bytes(bootstrap).items()):
                break
            for call, state in ((admin.pause_mirror_topics, "PAUSED"), (admin.resume_mirror_topics, "MIRRORING")):
                assert set((await call("m", [TOPIC])).values()) == {None}
                await asyncio.wait_for(wait_state(admin, state), 60)
                sample.append((log_size(dest, "__mirror_state", 0), log_size(dest, "__consumer_offsets", 0)))
            cycles += 1
    return cycles


def churn(source: LocalCluster, dest: LocalCluster, tmp_path: Path, seconds: float,
          until_written: float | None = None) -> None:
    create_topic(source.bootstrap, TOPIC, PARTITIONS)
    produce_acked(source.bootstrap, TOPIC, 60, PARTITIONS)
    create_mirror(dest, source, "m", TOPIC, tmp_path / "mirror.properties")
    ends = end_offsets(source.bootstrap, TOPIC, PARTITIONS)
    wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, PARTITIONS) == ends, "mirrored", retry_on=(KafkaException,))

    commits = CommitChurn(dest.bootstrap)
    commits.start()
    samples: list[tuple[int, int]] = []
    try:
        cycles = asyncio.run(pause_resume_churn(dest.bootstrap, seconds, samples, dest, until_written))
    finally:
        commits.stop.set()
        commits.join(60)
    assert commits.error is None, commits.error
    # Written more than twice the bound (the records appended, at their least size), yet every
    # sample stays within it.
    written = written_bytes(dest.bootstrap)
    largest = {t: max(s[i] for s in samples) for i, t in enumerate(BOUNDS)}
    assert all(written[t] > 2 * BOUNDS[t] for t in BOUNDS), (cycles, written)
    assert all(largest[t] < BOUNDS[t] for t in BOUNDS), (largest, written)

    # The last call was a resume: MIRRORING; the latest offsets and states survive a kill -9.
    assert set(partition_states(dest.bootstrap, TOPIC).values()) == {"MIRRORING"}
    assert committed(dest.bootstrap) == [commits.commits] * PARTITIONS
    dest.kill9()
    dest.start_node(1)
    wait_until(lambda: committed(dest.bootstrap) == [commits.commits] * PARTITIONS, "offsets read back",
               retry_on=(KafkaException,), timeout_s=120)
    wait_until(lambda: set(partition_states(dest.bootstrap, TOPIC).values()) == {"MIRRORING"},
               "MIRRORING after restart", timeout_s=120)
    produce_acked(source.bootstrap, TOPIC, 12, PARTITIONS, prefix="after")
    ends = end_offsets(source.bootstrap, TOPIC, PARTITIONS)
    wait_until(lambda: end_offsets(dest.bootstrap, TOPIC, PARTITIONS) == ends, "mirroring on after restart",
               retry_on=(KafkaException,), timeout_s=120)


def test_internal_topics_stay_bounded_under_churn(
    churn_clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    """Churn until each log has had 2.5 times its bound appended (the cleaner had to
    compact it over and over), at most 90 s."""
    churn(*churn_clusters, tmp_path, seconds=90, until_written=2.5)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_internal_topics_stay_bounded_over_ten_minutes_of_churn(
    churn_clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    churn(*churn_clusters, tmp_path, seconds=600)
