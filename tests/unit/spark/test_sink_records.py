"""The sink's vectorised record encoding equals the per-record reference encoder, byte for byte,
and its murmur2 equals Kafka's (`kmirror.client.partitioner`)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from kmirror.client.partitioner import murmur2, partition_for_key
from kmirror.records.builder import SimpleRecord, build_batch, build_batch_from_records
from kmirror.records.record import encode_record
from kmirror.spark.sink_records import batches_of, encode_records, partitions_for_keys
from kmirror.spark.sink_records import murmur2 as vector_murmur2

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def random_bytes(rng: random.Random, n: int) -> bytes:
    return bytes(rng.getrandbits(8) for _ in range(n))


def test_murmur2_of_every_length_equals_kafkas() -> None:
    rng = random.Random(7)
    keys = [random_bytes(rng, n) for n in range(40) for _ in range(5)] + [b"", b"key-1", "ключ".encode()]
    got = vector_murmur2(pa.array(keys, pa.binary()))
    assert [int(h) - (1 << 32) if h & 0x80000000 else int(h) for h in got] == [murmur2(k) for k in keys]
    assert list(partitions_for_keys(pa.array(keys, pa.binary()), 7)) == [partition_for_key(k, 7) for k in keys]
    sliced = pa.array([b"x"] + keys, pa.binary()).slice(1)  # an Arrow offset other than 0
    assert list(partitions_for_keys(sliced, 5)) == [partition_for_key(k, 5) for k in keys]
    assert list(partitions_for_keys(pa.array(["a", "bcde"], pa.string()), 3)) == \
        [partition_for_key(b"a", 3), partition_for_key(b"bcde", 3)]


@pytest.mark.parametrize("with_headers", [False, True])
@pytest.mark.parametrize("per_batch", [1, 3, 1000])
def test_records_equal_the_reference_encoder(with_headers: bool, per_batch: int) -> None:
    rng = random.Random(per_batch)
    sizes = [0, 1, 63, 64, 127, 128, 8191, 8192, 20000, 3]
    rows = []
    for i in range(60):
        key = None if i % 5 == 0 else random_bytes(rng, rng.choice(sizes))
        value = None if i % 11 == 0 else random_bytes(rng, rng.choice(sizes))
        headers = None if i % 3 == 0 else [(f"h{j}é", None if j % 2 else random_bytes(rng, rng.choice(sizes)))
                                           for j in range(i % 4)]
        rows.append((key, value, headers))
    keys = pa.array([r[0] for r in rows], pa.binary())
    values = pa.array([r[1] for r in rows], pa.binary())
    headers = pa.array([None if r[2] is None else [{"key": k, "value": v} for k, v in r[2]] for r in rows], HEADERS)
    encoded = encode_records(keys, values, headers if with_headers else None, per_batch)
    expected = [encode_record(i % per_batch, 0, k, v, tuple(h or ()) if with_headers else ())
                for i, (k, v, h) in enumerate(rows)]
    assert encoded.to_pylist() == expected
    sections = list(batches_of(encoded, per_batch))
    assert [s.count for s in sections] == [min(per_batch, 60 - s) for s in range(0, 60, per_batch)]
    assert b"".join(bytes(s.records) for s in sections) == b"".join(expected)
    # A batch around the first section equals the reference builder's batch.
    first = sections[0]
    records = [SimpleRecord(k, v, tuple(h or ()) if with_headers else ()) for k, v, h in rows[:first.count]]
    for compression in (0, 4):
        assert build_batch_from_records(first.records, first.count, base_timestamp=1000, max_timestamp=1000,
                                        compression=compression, producer_id=5, producer_epoch=1,
                                        base_sequence=9) == \
            build_batch(records, compression=compression, producer_id=5, producer_epoch=1, base_sequence=9,
                        now_ms=1000)


def test_string_columns_and_sliced_arrays() -> None:
    values = pa.array(["zero", "one", None, "three"], pa.string()).slice(1)
    keys = pa.array(["k0", None, "k2", "k3"], pa.string()).slice(1)
    encoded = encode_records(keys, values, None, 10)
    assert encoded.to_pylist() == [encode_record(0, 0, None, b"one"), encode_record(1, 0, b"k2", None),
                                   encode_record(2, 0, b"k3", b"three")]
    assert encode_records(None, values, None, 2).to_pylist() == [
        encode_record(0, 0, None, b"one"), encode_record(1, 0, None, None), encode_record(0, 0, None, b"three")]
