"""Byte-exact mirroring of batches written by other client producers than librdkafka:
kafka-python (gzip, lz4, zstd, none; idempotent, its default) and aiokafka (every codec,
idempotent and not), with keys, headers and several records per batch. Their batch shapes
differ from librdkafka's (timestamps, attributes, record framing); the destination must hold
the very same bytes at the same offsets."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from kafka import KafkaProducer

from kmirror.records.batch import iter_batches
from kmirror.testing.mirror_clusters import create_mirror, partition_states, wait_until
from kmirror.testing.processes import LocalCluster, kmirror
from kmirror.testing.segments import headers, log_batches

pytestmark = pytest.mark.integration

TOPIC = "clients"
PARTITIONS = 2
RECORDS = 40
KAFKA_PYTHON_CODECS = (None, "gzip", "lz4", "zstd")  # no snappy module for kafka-python here
AIOKAFKA_CODECS = (None, "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {None: 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def record(client: str, codec: str | None, i: int) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    key = f"{client}-{codec}-{i % 5}".encode()
    value = f"{client} {codec} value {i} ".encode() * (1 + i % 9)
    return key, value, [("client", client.encode()), ("i", str(i).encode()), ("empty", b"")]


def produce_kafka_python(bootstrap: str) -> None:
    for codec in KAFKA_PYTHON_CODECS:
        producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=50, acks="all")
        for i in range(RECORDS):
            key, value, hdrs = record("kafka-python", codec, i)
            producer.send(TOPIC, value=value, key=key, headers=hdrs, partition=i % PARTITIONS)
        producer.flush(30)
        producer.close(10)


async def produce_aiokafka(bootstrap: str) -> None:
    for n, codec in enumerate(AIOKAFKA_CODECS):
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, compression_type=codec, linger_ms=50,
                                    enable_idempotence=n % 2 == 0, acks="all")
        await producer.start()
        try:
            sends = []
            for i in range(RECORDS):
                key, value, hdrs = record("aiokafka", codec, i)
                sends.append(await producer.send(TOPIC, value=value, key=key, headers=hdrs, partition=i % PARTITIONS))
            await asyncio.gather(*sends)
        finally:
            await producer.stop()


def test_batches_of_kafka_python_and_aiokafka_producers_are_mirrored_byte_identical(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC,
            "--partitions", str(PARTITIONS))
    produce_kafka_python(source.bootstrap)
    asyncio.run(produce_aiokafka(source.bootstrap))

    written = {p: log_batches(source, TOPIC, p) for p in range(PARTITIONS)}
    every = [h for p in written for h in headers(written[p])]
    # What the test claims to cover: every codec, batches of several records, idempotent
    # (producer id set) and plain batches, from both clients.
    assert {h.compression for h in every} == set(CODEC_IDS.values())
    assert max(h.records_count for h in every) > 1
    assert {h.producer_id >= 0 for h in every} == {True, False}
    assert sum(h.records_count for h in every) == RECORDS * (len(KAFKA_PYTHON_CODECS) + len(AIOKAFKA_CODECS))

    create_mirror(dest, source, "m", TOPIC, tmp_path / "mirror.properties")
    for p in range(PARTITIONS):
        wait_until(lambda p=p: log_batches(dest, TOPIC, p) == written[p], f"partition {p} byte-identical",
                   seen=lambda: partition_states(dest.bootstrap, TOPIC))
        mirrored = log_batches(dest, TOPIC, p)
        assert [offset for offset, _ in mirrored] == [offset for offset, _ in written[p]]
        for (_, src_raw), (_, dst_raw) in zip(written[p], mirrored, strict=True):
            assert dst_raw == src_raw
            ((_, h),) = iter_batches(dst_raw)
            assert h.size == len(dst_raw)
    assert partition_states(dest.bootstrap, TOPIC) == {p: "MIRRORING" for p in range(PARTITIONS)}
