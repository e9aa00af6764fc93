"""KIP-1279 copy from scratch (Log Convergence example A) and a corrupt source batch, on real
processes: two single-node clusters, the `kmirror` CLI and confluent-kafka clients.

Example A: the source answers LME -1 ("no LME knowledge for this partition"), so the
destination truncates everything and replicates from scratch. Through public operations a
destination topic can hold data with the source's topic id only after it mirrored that topic
before or was its source; the test builds the failback form: B mirrored A and failed over,
then B deleted its mirror (so B keeps no LME), A wrote a tail and fails back from B.

Corrupt batch: a batch of partition 0 is damaged in the source's segment file; the destination
fetcher's CRC check refuses it and moves only partition 0 to FAILED. The KIP's recovery is to
fix the source and remove and add the topic back."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kmirror.kip1279.errors import MirrorError
from kmirror.records.batch import iter_batches
from kmirror.records.control import ControlType, read_control_type
from kmirror.testing.kafka_clients import produce_refused, watermarks
from kmirror.testing.metrics_scrape import metric_value
from kmirror.testing.mirror_clusters import clusters_up, create_mirror, describe, partition_states, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.segments import crc_valid, headers, log_batches, segment_files

pytestmark = pytest.mark.integration

MIRROR = "dr"
FAILED_PARTITIONS = "kafka_server_mirror_mirrorfetchermanager_failedpartitionscount"
FAILED_STATE = "kafka_server_mirror_mirrormetadatamanager_failedpartitionstate"
MIRRORING_STATE = "kafka_server_mirror_mirrormetadatamanager_mirroringpartitionstate"
FAST_REFRESH = {"mirror.metadata.refresh.interval.ms": "300"}


@pytest.fixture
def cluster_overrides() -> dict[str, str]:
    return dict(FAST_REFRESH)


@pytest.fixture
def dest_overrides() -> dict[str, str]:
    return {"metrics.port": str(free_port_block())}


def produce(bootstrap: str, topic: str, partition: int, tag: str, batches: int, per_batch: int = 5,
            codec: str = "lz4") -> list[int]:
    """`batches` batches of `per_batch` records (one flush each) from one idempotent producer;
    the offsets written."""
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "enable.idempotence": True,
                         "linger.ms": 50})
    offsets: list[int] = []

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        assert err is None, err
        offsets.append(msg.offset())  # type: ignore[attr-defined]

    for b in range(batches):
        for i in range(per_batch):
            producer.produce(topic, key=f"{tag}-{i}".encode(), value=f"{tag} {b}.{i} ".encode() * 8,
                             partition=partition, headers=[("tag", tag.encode())], on_delivery=on_delivery)
        assert producer.flush(30) == 0
    return sorted(offsets)


def create_topic(cluster: LocalCluster, topic: str, partitions: int, *configs: str) -> None:
    args = ["topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", topic,
            "--partitions", str(partitions), "--replication-factor", "1"]
    for config in configs:
        args += ["--config", config]
    kmirror(*args)


def mirrored(dest: LocalCluster, source: LocalCluster, topic: str, partition: int) -> bool:
    batches = log_batches(source, topic, partition)
    return bool(batches) and log_batches(dest, topic, partition) == batches


# --- KIP Log Convergence, example A -------------------------------------------------------


def test_failback_from_a_source_without_lme_truncates_to_zero_and_copies_everything(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    a, b = clusters
    topic = "ledger"
    create_topic(a, topic, 1)
    produce(a.bootstrap, topic, 0, "first", 6, codec="zstd")

    # A -> B, then failover on B and writes at B.
    create_mirror(b, a, MIRROR, topic, tmp_path / "b-mirror.properties")
    wait_until(lambda: mirrored(b, a, topic, 0) and partition_states(b.bootstrap, topic) == {0: "MIRRORING"},
               "B to mirror A")
    a_end = watermarks(a.bootstrap, topic, 0)[1]
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--remove", "--topic", ".*")
    wait_until(lambda: partition_states(b.bootstrap, topic) == {0: "STOPPED"}, "STOPPED on B")
    at_b = produce(b.bootstrap, topic, 0, "at-b", 4, codec="gzip")
    assert at_b[0] == a_end + 1  # after B's MIRROR_PID_RESET

    # B deletes its mirror: B keeps no LME for the topic (the KIP's "no LME knowledge").
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--delete", "--mirror", MIRROR)
    assert MIRROR not in kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--list").stdout
    # A keeps taking writes: a tail B never saw, uncompressed so that its values show in the file.
    produce(a.bootstrap, topic, 0, "divergent-at-a", 3, codec="none")
    a_before = log_batches(a, topic, 0)
    (a_segment,) = segment_files(a, topic, 0)
    assert b"divergent-at-a" in a_segment.read_bytes()
    assert log_batches(b, topic, 0)[:len(a_before) - 3] == a_before[:-3]  # common prefix, then divergence

    # Failback: A mirrors B. B answers DescribeMirrors for `dr` without it (UNKNOWN_MIRROR), so
    # the LME is -1: A truncates fully (its segment file is replaced) and copies everything.
    held = os.open(a_segment, os.O_RDONLY)
    try:
        create_mirror(a, b, MIRROR, topic, tmp_path / "a-mirror.properties")
        wait_until(lambda: mirrored(a, b, topic, 0) and describe(a.bootstrap)[(MIRROR, topic, 0)][2:] == (0, "MIRRORING"),
                   "A to copy B from scratch")
        assert os.fstat(held).st_nlink == 0  # the old segment was deleted, not truncated in place
    finally:
        os.close(held)

    a_log, b_log = log_batches(a, topic, 0), log_batches(b, topic, 0)
    assert a_log == b_log  # same offsets, same bytes, batch by batch
    assert a_log[0][0] == 0 and watermarks(a.bootstrap, topic, 0) == watermarks(b.bootstrap, topic, 0) == (
        0, at_b[-1] + 1)
    reset = headers(a_log)[len(a_before) - 3]
    assert reset.is_control and reset.base_offset == a_end
    assert read_control_type(a_log[len(a_before) - 3][1]) == ControlType.MIRROR_PID_RESET
    assert b"divergent-at-a" not in b"".join(p.read_bytes() for p in segment_files(a, topic, 0))
    assert produce_refused(a.bootstrap, topic) == MirrorError.READ_ONLY_TOPIC
    assert partition_states(a.bootstrap, topic) == {0: "MIRRORING"}


# --- a corrupt batch at the source --------------------------------------------------------


def corrupt_first_batch_of(segment: Path) -> tuple[int, int]:
    """Flip the last byte of the segment's first batch (inside its last record, covered by the
    CRC); (base offset, record count) of that batch."""
    raw = bytearray(segment.read_bytes())
    (position, header), *_ = headers_at(bytes(raw))
    raw[position + header.size - 1] ^= 0xFF
    segment.write_bytes(bytes(raw))
    return header.base_offset, header.records_count


def overstate_length_of_first_batch_of(segment: Path) -> int:
    """Make the segment's first batch claim 100 000 more bytes than it has, past the end of
    the file (a malformed batch: its CRC is intact); its base offset."""
    raw = bytearray(segment.read_bytes())
    (position, header), *_ = headers_at(bytes(raw))
    raw[position + 8:position + 12] = (header.batch_length + 100_000).to_bytes(4, "big")
    segment.write_bytes(bytes(raw))
    return int(header.base_offset)


def headers_at(raw: bytes) -> list[tuple[int, Any]]:
    return list(iter_batches(raw))


def consume_all(bootstrap: str, topic: str, partition: int, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "check.crcs": True})
    values: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        deadline = time.monotonic() + 30
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(bytes(msg.value()))
    finally:
        consumer.close()
    return values


def test_corrupt_source_batch_fails_only_its_partition_and_remove_add_back_recovers(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    a, b = clusters
    topic = "payments"
    # Small segments, so the batch to damage lies in a rolled segment: a clean restart rescans
    # only the active segment (loader recovery), and the source keeps serving stored bytes.
    create_topic(a, topic, 2, "segment.bytes=1024")
    produce(a.bootstrap, topic, 0, "p0", 12)
    produce(a.bootstrap, topic, 1, "p1", 6)
    a_p0_end = watermarks(a.bootstrap, topic, 0)[1]

    a.down()
    segments = segment_files(a, topic, 0)
    assert len(segments) >= 3
    bad_offset, bad_count = corrupt_first_batch_of(segments[1])
    assert bad_offset > 0
    a.start_node(1)
    served = dict(log_batches(a, topic, 0))
    assert not crc_valid(served[bad_offset]) and watermarks(a.bootstrap, topic, 0)[1] == a_p0_end

    create_mirror(b, a, MIRROR, topic, tmp_path / "b-mirror.properties")
    wait_until(lambda: partition_states(b.bootstrap, topic) == {0: "FAILED", 1: "MIRRORING"}
               and mirrored(b, a, topic, 1), "p0 FAILED, p1 mirrored")
    # No corrupt byte reached B: its p0 holds exactly A's batches before the damaged one.
    b_p0 = log_batches(b, topic, 0)
    assert b_p0 == [(o, raw) for o, raw in log_batches(a, topic, 0) if o < bad_offset]
    assert b_p0 and all(crc_valid(raw) for _, raw in b_p0)
    assert watermarks(b.bootstrap, topic, 0)[1] == bad_offset
    failures = [line for line in b.log_text().splitlines() if "FAILED" in line and f"{topic}-0" in line]
    assert failures and "CORRUPT_MESSAGE" in failures[0] and str(bad_offset) in failures[0], failures
    assert not any(f"{topic}-1" in line and "FAILED" in line for line in b.log_text().splitlines())

    # p1 keeps mirroring; B keeps serving clients; p0 stays where it stopped.
    produce(a.bootstrap, topic, 1, "p1-later", 3)
    wait_until(lambda: mirrored(b, a, topic, 1), "p1 to keep mirroring")
    p1_records = sum(h.records_count for h in headers(log_batches(a, topic, 1)))
    assert len(consume_all(b.bootstrap, topic, 1, p1_records)) == p1_records
    assert produce_refused(b.bootstrap, topic) == MirrorError.READ_ONLY_TOPIC
    assert log_batches(b, topic, 0) == b_p0
    rows = describe(b.bootstrap)
    assert rows[(MIRROR, topic, 0)][3] == "FAILED" and rows[(MIRROR, topic, 1)][2:] == (0, "MIRRORING")
    b_metrics = int(b.overrides["metrics.port"])
    assert [metric_value(b_metrics, m) for m in (FAILED_PARTITIONS, FAILED_STATE, MIRRORING_STATE)] == [1, 1, 1]
    # FAILED waits for the operator: a crash and restart of B neither resumes p0 nor stops p1.
    b.kill9()
    b.start_node(1)
    produce(a.bootstrap, topic, 1, "p1-after-restart", 2)
    wait_until(lambda: partition_states(b.bootstrap, topic) == {0: "FAILED", 1: "MIRRORING"}
               and mirrored(b, a, topic, 1), "p0 still FAILED and p1 mirroring after B restarts",
               seen=lambda: describe(b.bootstrap))
    assert log_batches(b, topic, 0) == b_p0
    # Loaded as FAILED, not failed again by a new fetch of the damaged batch: still one line.
    assert [line for line in b.log_text().splitlines() if "FAILED" in line and f"{topic}-0" in line] == failures

    # The KIP's FAILED recipe: fix the source (DeleteRecords past the damaged batch), then
    # remove the topic and add it back. A answers no LME (no DescribeMirrors there: mirroring
    # is not enabled on A), so B truncates both partitions fully and copies from scratch.
    fixed_start = bad_offset + bad_count
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    futures = admin.delete_records([TopicPartition(topic, 0, fixed_start)])
    assert [f.result(30).low_watermark for f in futures.values()] == [fixed_start]
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--remove", "--topic", topic)
    wait_until(lambda: partition_states(b.bootstrap, topic).get(1) == "STOPPED"
               and partition_states(b.bootstrap, topic).get(0) != "FAILED", "the topic removed",
               seen=lambda: describe(b.bootstrap))
    kmirror("mirrors", "--bootstrap-server", b.bootstrap, "--add", "--mirror", MIRROR, "--topic", topic)
    a_p0_from_start = [(o, raw) for o, raw in log_batches(a, topic, 0) if o >= fixed_start]
    wait_until(lambda: partition_states(b.bootstrap, topic) == {0: "MIRRORING", 1: "MIRRORING"}
               and log_batches(b, topic, 0) == a_p0_from_start and mirrored(b, a, topic, 1),
               "both partitions mirroring again", seen=lambda: describe(b.bootstrap))
    assert watermarks(b.bootstrap, topic, 0) == (fixed_start, a_p0_end)
    assert [metric_value(b_metrics, m) for m in (FAILED_PARTITIONS, FAILED_STATE, MIRRORING_STATE)] == [0, 0, 2]
    assert all(crc_valid(raw) for _, raw in log_batches(b, topic, 0))
    # p1 was copied again from scratch: the MIRROR_PID_RESET of the removal is gone.
    assert not any(h.is_control for h in headers(log_batches(b, topic, 1)))
    produce(a.bootstrap, topic, 0, "p0-after-fix", 2)
    wait_until(lambda: log_batches(b, topic, 0) == [(o, raw) for o, raw in log_batches(a, topic, 0)
                                                    if o >= fixed_start], "p0 to keep mirroring after the fix")


# --- a batch cut by the response size is no corruption ------------------------------------


def test_a_batch_cut_by_the_fetch_response_size_is_fetched_again_not_failed(tmp_path: Path) -> None:
    """B's mirror fetcher asks for 1500 bytes per partition and 2000 per response; A's
    batches are about 1.2 KB. The first partition of an answer gets one whole batch (KIP-74)
    and the second what is left, part of its first batch: that is fetched again, never
    CORRUPT_MESSAGE, and both partitions end byte-identical."""
    a = LocalCluster(dir=tmp_path / "a", port=free_port_block())
    b = LocalCluster(dir=tmp_path / "b", port=free_port_block(), overrides={
        **FAST_REFRESH, "replica.fetch.max.bytes": "1500", "replica.fetch.response.max.bytes": "2000"})
    topic = "wide"
    with clusters_up(a, b):
        create_topic(a, topic, 2)
        for p in range(2):
            produce(a.bootstrap, topic, p, f"p{p}", 6, per_batch=15, codec="none")
        sizes = {len(raw) for p in range(2) for _, raw in log_batches(a, topic, p)}
        assert all(1500 > size > 2000 - 1500 for size in sizes), sizes
        create_mirror(b, a, MIRROR, topic, tmp_path / "b-mirror.properties")
        wait_until(lambda: mirrored(b, a, topic, 0) and mirrored(b, a, topic, 1), "both partitions mirrored",
                   seen=lambda: describe(b.bootstrap))
        assert partition_states(b.bootstrap, topic) == {0: "MIRRORING", 1: "MIRRORING"}
        assert "FAILED" not in b.log_text()


def test_a_batch_running_past_the_source_file_fails_only_its_partition(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    """The other side of the rule above: a batch whose length field runs past the end of the
    source's segment reaches B cut even as the first partition of an answer, where the source
    must send a whole batch, so it is malformed: CORRUPT_MESSAGE and FAILED for p0 only."""
    a, b = clusters
    topic = "malformed"
    create_topic(a, topic, 2, "segment.bytes=1024")
    produce(a.bootstrap, topic, 0, "p0", 6, codec="none")
    produce(a.bootstrap, topic, 1, "p1", 3, codec="none")
    a.down()
    segments = segment_files(a, topic, 0)
    assert len(segments) >= 3
    first = segments[0].read_bytes()
    expected_b_p0 = [(h.base_offset, first[pos:pos + h.size]) for pos, h in headers_at(first)]
    bad_offset = overstate_length_of_first_batch_of(segments[1])
    a.start_node(1)

    create_mirror(b, a, MIRROR, topic, tmp_path / "b-mirror.properties")
    wait_until(lambda: partition_states(b.bootstrap, topic) == {0: "FAILED", 1: "MIRRORING"}
               and mirrored(b, a, topic, 1), "p0 FAILED, p1 mirrored", seen=lambda: describe(b.bootstrap))
    assert log_batches(b, topic, 0) == expected_b_p0 and expected_b_p0[-1][0] < bad_offset
    assert watermarks(b.bootstrap, topic, 0)[1] == bad_offset
    failures = [line for line in b.log_text().splitlines() if "FAILED" in line and f"{topic}-0" in line]
    assert len(failures) == 1 and "CORRUPT_MESSAGE" in failures[0], failures
