"""KIP-1279 end to end with real processes: a source and a destination cluster, records
produced with every compression type, keys and headers; `kmirror mirrors` copies them; every
destination batch is byte-identical at the same offset, with the same topic id; the mirror
topic refuses Produce with READ_ONLY_TOPIC; `--describe` shows lag 0 while MIRRORING; failover
with `--remove --topic '.*'` stops the partitions and makes the topic writable after a
MIRROR_PID_RESET control record, in a leader epoch above every mirrored one."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from kmirror.mirror.errors import MirrorError
from kmirror.records.batch import BatchHeader, iter_batches
from kmirror.records.control import ControlType, read_control_type
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration

TOPIC = "orders"
PARTITIONS = 2
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
SEGMENT = "00000000000000000000.log"


@pytest.fixture
def clusters(tmp_path: Path) -> Iterator[tuple[LocalCluster, LocalCluster]]:
    source = LocalCluster(dir=tmp_path / "source", port=free_port_block())
    source.up()
    dest = LocalCluster(dir=tmp_path / "dest", port=free_port_block())
    try:
        dest.up()
        yield source, dest
    finally:
        dest.down()
        source.down()


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def produce_everything(bootstrap: str) -> None:
    """Several producers (one per codec, idempotent), keys and headers, both partitions."""
    for codec in CODECS:
        producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "enable.idempotence": True,
                             "linger.ms": 20})
        for i in range(60):
            producer.produce(TOPIC, key=f"{codec}-{i % 7}".encode(), value=f"{codec} value {i} ".encode() * 8,
                             partition=i % PARTITIONS, headers=[("codec", codec.encode()), ("i", str(i).encode())])
        assert producer.flush(30) == 0


def end_offsets(bootstrap: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "enable.auto.commit": False})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10, cached=False)[1]
                for p in range(PARTITIONS)]
    finally:
        consumer.close()


def segment_batches(cluster: LocalCluster, partition: int) -> list[tuple[int, bytes]]:
    raw = (cluster.dir / "node-1" / "data" / f"{TOPIC}-{partition}" / SEGMENT).read_bytes()
    return [(h.base_offset, raw[pos:pos + h.size]) for pos, h in iter_batches(raw)]


def topic_id(bootstrap: str) -> str:
    out = kmirror("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", TOPIC).stdout
    first = out.splitlines()[0]
    return first.split("TopicId: ")[1].split("\t")[0]


def describe(bootstrap: str) -> dict[tuple[str, str, int], tuple[int, int, int, str]]:
    """`kmirror mirrors --describe` rows: (mirror, topic, partition) -> (source offset,
    destination offset, lag, state)."""
    out = kmirror("mirrors", "--bootstrap-server", bootstrap, "--describe").stdout
    lines = [line.split() for line in out.splitlines() if line.strip()]
    assert lines[0] == ["MIRROR", "TOPIC", "PARTITION", "SOURCE-OFFSET", "DESTINATION-OFFSET", "LAG", "STATE"]
    return {(m, t, int(p)): (int(src), int(dst), int(lag), state) for m, t, p, src, dst, lag, state in lines[1:]}


def headers(batches: list[tuple[int, bytes]]) -> list[BatchHeader]:
    return [h for _, raw in batches for _, h in iter_batches(raw)]


def test_mirror_copies_byte_identical_batches_refuses_produce_and_fails_over(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC,
            "--partitions", str(PARTITIONS), "--replication-factor", "1")
    produce_everything(source.bootstrap)
    source_ends = end_offsets(source.bootstrap)
    assert all(end > 0 for end in source_ends)

    kmirror("features", "--bootstrap-server", dest.bootstrap, "upgrade", "--feature", "mirror.version=1")
    config = tmp_path / "mirror.properties"
    config.write_text(f"bootstrap.servers={source.bootstrap}\n")
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--create", "--mirror", "m",
            "--mirror-config", str(config))
    kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--add", "--mirror", "m", "--topic", TOPIC)

    wait_until(lambda: end_offsets(dest.bootstrap) == source_ends, "the destination to reach the source log end")
    assert topic_id(dest.bootstrap) == topic_id(source.bootstrap)
    for p in range(PARTITIONS):
        src_batches = segment_batches(source, p)
        assert len(src_batches) >= len(CODECS)
        wait_until(lambda p=p: len(segment_batches(dest, p)) == len(segment_batches(source, p)),
                   f"partition {p} segment bytes")
        assert segment_batches(dest, p) == src_batches  # same offsets, same bytes

    # A mirror topic is read-only.
    producer = Producer({"bootstrap.servers": dest.bootstrap, "message.send.max.retries": 0})
    errors: list[KafkaError] = []
    producer.produce(TOPIC, value=b"nope", partition=0, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    # READ_ONLY_TOPIC (KIP-1279 code 135; librdkafka has no name for it yet)
    assert errors and errors[0] is not None and errors[0].code() == MirrorError.READ_ONLY_TOPIC == 135

    # --describe: caught up, lag 0, MIRRORING.
    rows = describe(dest.bootstrap)
    assert sorted(rows) == [("m", TOPIC, p) for p in range(PARTITIONS)]
    for p in range(PARTITIONS):
        assert rows[("m", TOPIC, p)] == (source_ends[p], source_ends[p], 0, "MIRRORING")
    mirrored = {p: segment_batches(dest, p) for p in range(PARTITIONS)}

    # Failover: every mirror topic leaves the mirror; partitions go STOPPING -> STOPPED.
    out = kmirror("mirrors", "--bootstrap-server", dest.bootstrap, "--remove", "--topic", ".*").stdout
    assert f"Removed 1 topic(s) from mirror m: [{TOPIC}]" in out
    wait_until(lambda: {row[3] for row in describe(dest.bootstrap).values()} == {"STOPPED"}, "partitions STOPPED")

    # The topic is writable: an idempotent producer succeeds at sequence 0.
    producer = Producer({"bootstrap.servers": dest.bootstrap, "enable.idempotence": True})
    delivered: list[tuple[int, int]] = []

    def on_delivery(err: KafkaError | None, msg: object) -> None:
        assert err is None, err
        delivered.append((msg.partition(), msg.offset()))  # type: ignore[attr-defined]

    for p in range(PARTITIONS):
        producer.produce(TOPIC, key=b"after", value=b"written at the destination", partition=p,
                         on_delivery=on_delivery)
    assert producer.flush(30) == 0
    # The last mirrored offset is source_end - 1; MIRROR_PID_RESET takes source_end; the
    # first record produced after failover lands at source_end + 1.
    assert sorted(delivered) == [(p, source_ends[p] + 1) for p in range(PARTITIONS)]
    assert end_offsets(dest.bootstrap) == [end + 2 for end in source_ends]

    mirrored_pids = {h.producer_id for p in range(PARTITIONS) for h in headers(mirrored[p]) if h.producer_id >= 0}
    for p in range(PARTITIONS):
        after = segment_batches(dest, p)
        assert after[:len(mirrored[p])] == mirrored[p]  # the mirrored prefix is untouched
        assert after[:len(mirrored[p])] == segment_batches(source, p)
        reset, new = headers(after[len(mirrored[p]):])
        max_mirrored_epoch = max(h.partition_leader_epoch for h in headers(mirrored[p]))
        # MIRROR_PID_RESET: one control record (type 7) at the source log end.
        assert reset.is_control and reset.base_offset == source_ends[p] and reset.records_count == 1
        assert read_control_type(after[len(mirrored[p])][1]) == ControlType.MIRROR_PID_RESET == 7
        # The leader epoch was bumped above every mirrored epoch before the first write.
        assert reset.partition_leader_epoch > max_mirrored_epoch
        assert new.partition_leader_epoch >= reset.partition_leader_epoch
        # The producer starts fresh at sequence 0, with a producer id above every mirrored
        # one (KIP-1279: "separate from previously mirrored IDs"): the failover fenced the
        # ids up to the greatest mirrored one (BumpLeaderEpochs' MinProducerId).
        assert new.base_offset == source_ends[p] + 1 and new.base_sequence == 0 and new.producer_epoch == 0
        assert not new.is_control and new.producer_id > max(mirrored_pids)
    assert len(mirrored_pids) == len(CODECS)
