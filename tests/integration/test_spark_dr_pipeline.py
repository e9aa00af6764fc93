"""The clickstream DR pipeline (`kmirror.pipelines`) across a real disaster: clusters A -> B
(single-node kmirror processes), a real SparkSession (local[2], one per module).

Proven: after kill -9 of A and `kmirror mirrors --remove` on B, the same query with the same
checkpoint, only `kafka.bootstrap.servers` changed, continues on B and its output equals a
run with no interruption over the surviving log, record for record (nothing twice, nothing
lost beyond what asynchronous mirroring lost); the records lost are reported from the lag at
failover and the count is exact (A's own log, once A is back, says the same); after failback
the same checkpoint moves back to A and continues. Contrast: the same job over a
MirrorMaker-style copy (consumer -> producer, new offsets) silently skips records."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient

from kmirror.pipelines import clickstream
from kmirror.pipelines.failover import lag_at_failover, lost_records
from kmirror.testing.kafka_clients import create_topic, end_offsets
from kmirror.testing.mirror_clusters import create_mirror, describe, wait_until
from kmirror.testing.processes import LocalCluster, kmirror
from kmirror.testing.segments import log_batches
from kmirror.testing.spark import SKIP_REASON, java_available

pytestmark = [pytest.mark.integration, pytest.mark.skipif(not java_available(), reason=SKIP_REASON)]

TOPIC = "clicks"
PARTITIONS = 2
POLL = {"kafkaConsumer.pollTimeoutMs": "10000"}


@pytest.fixture
def cluster_overrides() -> dict[str, str]:
    return {"mirror.metadata.refresh.interval.ms": "300"}


def produce_clicks(bootstrap: str, ids: range, topic: str = TOPIC) -> None:
    """Events `ids` (event i on partition i % 2, user u<i % 7>), plus one malformed line."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "zstd"})
    for i in ids:
        producer.produce(topic, partition=i % PARTITIONS, key=b"u%d" % (i % 7),
                         value=clickstream.click_event(f"e{i}", f" u{i % 7} ", "Click" if i % 3 else " VIEW",
                                                       f"/p/{i % 11}", 1_760_000_000_000 + i))
    producer.produce(topic, partition=ids.start % PARTITIONS, value=b"{not json")
    assert producer.flush(30) == 0


def event_ids(rows: list[tuple[Any, ...]]) -> list[int]:
    return sorted(int(r[3][1:]) for r in rows)


def mirror_states(bootstrap: str) -> set[str]:
    return {row[3] for (_, t, _), row in describe(bootstrap).items() if t == TOPIC}


def same_logs(x: LocalCluster, y: LocalCluster) -> bool:
    return all(log_batches(x, TOPIC, p) == log_batches(y, TOPIC, p) for p in range(PARTITIONS))


def reference_run(spark: Any, bootstrap: str, base: Path) -> tuple[list[tuple[Any, ...]], dict[str, tuple[int, int]]]:
    """The same job in one uninterrupted run over `bootstrap`'s log, fresh checkpoint."""
    clickstream.run_available(spark, bootstrap, TOPIC, base / "out", base / "checkpoint", **POLL)
    return clickstream.clean_rows(spark, base / "out"), clickstream.user_totals(spark, base / "out")


@pytest.mark.slow
def test_streaming_job_fails_over_with_its_checkpoint_exactly_once_and_fails_back(
        clusters: tuple[LocalCluster, LocalCluster], spark: Any, tmp_path: Path) -> None:
    a, b = clusters
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    create_topic(a.bootstrap, TOPIC, PARTITIONS)
    produce_clicks(a.bootstrap, range(0, 200))
    create_mirror(b, a, "dr", TOPIC, tmp_path / "mirror.properties")

    # The job runs on A.
    assert clickstream.run_available(spark, a.bootstrap, TOPIC, out, checkpoint, **POLL) == 201
    produce_clicks(a.bootstrap, range(200, 300))  # not yet processed, mirrored
    wait_until(lambda: same_logs(a, b), "B to mirror A")

    # The mirror falls behind (paused: it still learns A's high watermark), A takes 40 more.
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--pause", "--topic", TOPIC)
    wait_until(lambda: mirror_states(b.bootstrap) == {"PAUSED"}, "PAUSED")
    b_ends = end_offsets(b.bootstrap, TOPIC, PARTITIONS)
    produce_clicks(a.bootstrap, range(300, 340))
    a_ends = end_offsets(a.bootstrap, TOPIC, PARTITIONS)
    truly_lost = sum(a_ends) - sum(b_ends)
    assert truly_lost == 41  # 40 events and a malformed line
    wait_until(lambda: lost_records(asyncio.run(lag_at_failover(b.bootstrap, [TOPIC]))) == truly_lost,
               "the mirror to see A's high watermark")

    # Disaster: A's node is killed. The operator reads the lag and fails over on B.
    a.kill9()
    points = asyncio.run(lag_at_failover(b.bootstrap, [TOPIC]))
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--remove", "--topic", TOPIC)
    wait_until(lambda: mirror_states(b.bootstrap) <= {"STOPPED"}, "B's partitions STOPPED")
    reported = {p.partition: p.lost_records for p in points}
    assert sum(reported.values()) == truly_lost
    assert {p.partition: p.destination_log_end for p in points} == dict(enumerate(b_ends))

    # The same query, same checkpoint, only kafka.bootstrap.servers changed, continues on B.
    produce_clicks(b.bootstrap, range(400, 450))
    assert clickstream.run_available(spark, b.bootstrap, TOPIC, out, checkpoint, **POLL) == 101 + 51
    rows, totals = clickstream.clean_rows(spark, out), clickstream.user_totals(spark, out)
    ref_rows, ref_totals = reference_run(spark, b.bootstrap, tmp_path / "reference-b")
    assert rows == ref_rows and totals == ref_totals  # record for record, and the aggregates
    assert event_ids(rows) == list(range(300)) + list(range(400, 450))  # each exactly once
    assert all(r[4] == r[4].strip() and r[5] in ("click", "view") for r in rows)  # cleaned

    # A comes back: its log holds exactly the reported records beyond B's failover point.
    a.start_node(1)
    assert [e - f for e, f in zip(end_offsets(a.bootstrap, TOPIC, PARTITIONS), b_ends, strict=True)] == \
        [reported[p] for p in range(PARTITIONS)]

    # Failback: A mirrors B under the same name (its lost tail is cut), and the same
    # checkpoint moves back to A and continues.
    create_mirror(a, b, "dr", TOPIC, tmp_path / "failback.properties")
    produce_clicks(b.bootstrap, range(500, 530))
    wait_until(lambda: same_logs(a, b) and mirror_states(a.bootstrap) == {"MIRRORING"}, "A to converge with B")
    assert clickstream.run_available(spark, a.bootstrap, TOPIC, out, checkpoint, **POLL) == 31
    rows = clickstream.clean_rows(spark, out)
    assert event_ids(rows) == list(range(300)) + list(range(400, 450)) + list(range(500, 530))
    assert (rows, clickstream.user_totals(spark, out)) == reference_run(spark, a.bootstrap, tmp_path / "reference-a")


def mirrormaker_copy(source: str, destination: str, topic: str) -> int:
    """A MirrorMaker-style copy: consume everything from the source, produce it to the
    destination (same partition, same key and value, new offsets). Records copied."""
    consumer = Consumer({"bootstrap.servers": source, "group.id": "mm", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    producer = Producer({"bootstrap.servers": destination, "linger.ms": 5})
    consumer.assign([CTopicPartition(topic, p, -2) for p in range(PARTITIONS)])
    copied, at_end = 0, set()
    while len(at_end) < PARTITIONS:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            at_end.add(msg.partition())
            continue
        producer.produce(topic, key=msg.key(), value=msg.value(), partition=msg.partition(),
                         timestamp=msg.timestamp()[1])
        copied += 1
    consumer.close()
    assert producer.flush(30) == 0
    return copied


@pytest.mark.slow
def test_the_same_job_over_a_mirrormaker_style_copy_skips_records(
        clusters: tuple[LocalCluster, LocalCluster], spark: Any, tmp_path: Path) -> None:
    """A's retention already removed its first 20 offsets per partition when the copy starts
    (a MirrorMaker copy begins at the earliest offset still there), so B's offsets are A's
    minus 20: the checkpoint's offsets point 20 records further on B, and Spark cannot tell."""
    a, b = clusters
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    create_topic(a.bootstrap, TOPIC, PARTITIONS)
    create_topic(b.bootstrap, TOPIC, PARTITIONS)
    produce_clicks(a.bootstrap, range(0, 200))
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    for f in admin.delete_records([CTopicPartition(TOPIC, p, 20) for p in range(PARTITIONS)]).values():
        f.result(30)
    clickstream.run_available(spark, a.bootstrap, TOPIC, out, checkpoint, **POLL)
    produce_clicks(a.bootstrap, range(200, 300))
    assert mirrormaker_copy(a.bootstrap, b.bootstrap, TOPIC) == (101 - 20) + (100 - 20) + 101

    # "Failover" to the copy: same checkpoint, B's bootstrap.
    clickstream.run_available(spark, b.bootstrap, TOPIC, out, checkpoint, **POLL)
    seen = event_ids(clickstream.clean_rows(spark, out))
    assert len(seen) == len(set(seen))
    missing = sorted(set(range(40, 300)) - set(seen))  # A's first 20 offsets per partition: events 0-39
    # Events 200..239 are skipped without an error: offsets 100..119 of each partition on B are
    # A's 120..139, so the checkpoint (A's next offset 101 / 100) lands 20 records late.
    assert len(missing) == 2 * 20 and missing[0] >= 200, missing
