"""KIP-1279 end to end with real processes: a source and a destination cluster, records
produced with every compression type, keys and headers; `kmirror mirrors` copies them; every
destination batch is byte-identical at the same offset, with the same topic id; the mirror
topic refuses Produce with READ_ONLY_TOPIC."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from kmirror.mirror.errors import MirrorError
from kmirror.records.batch import iter_batches
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


def test_mirror_copies_byte_identical_batches_with_the_source_topic_id_and_refuses_produce(
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
