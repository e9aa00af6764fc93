"""Vectorised record decoding equals the reference decoder, record by record."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from kmirror.records.batch import iter_batches
from kmirror.records.builder import build_batch
from kmirror.records.record import InvalidRecordError, decode_records
from kmirror.spark.arrow_records import arrow_schema, record_batches


def random_log(seed: int) -> tuple[bytes, int]:
    rng = random.Random(seed)
    parts, offset = [], 0
    for _ in range(25):
        records = []
        for _ in range(rng.randint(1, 40)):
            key = None if rng.random() < 0.2 else rng.randbytes(rng.randint(0, 300))
            value = None if rng.random() < 0.1 else rng.randbytes(rng.choice([0, 10, 200, 5000]))
            headers = tuple((f"h{j}", None if rng.random() < 0.3 else rng.randbytes(5))
                            for j in range(rng.choice([0, 0, 2])))
            records.append((key, value, headers, 1_700_000_000_000 + rng.randint(-10**6, 10**6)))
        parts.append(build_batch(records, compression=rng.choice([0, 1, 2, 3, 4]), base_offset=offset,
                                 timestamp_type=rng.choice([0, 1]), now_ms=1_800_000_000_000))
        offset += len(records) + rng.choice([0, 0, 3])  # gaps, as compaction leaves
    return b"".join(parts), offset


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("chunk_bytes", [1, 64 * 1024, 4 * 1024 * 1024])
def test_rows_equal_the_reference_decoder(seed: int, chunk_bytes: int) -> None:
    buf, end = random_log(seed)
    batches = list(iter_batches(buf))
    lo, hi = 7, end - 5
    expected = [r for pos, _ in batches for r in decode_records(buf, pos) if lo <= r.offset < hi]
    out = list(record_batches("t", 3, buf, batches, start_offset=lo, end_offset=hi, include_headers=True,
                              chunk_bytes=chunk_bytes))
    assert all(rb.schema == arrow_schema(True) for rb in out)
    rows = pa.Table.from_batches(out).to_pylist()
    assert len(rows) == len(expected)
    for row, record in zip(rows, expected, strict=True):
        assert (row["topic"], row["partition"], row["offset"]) == ("t", 3, record.offset)
        assert (row["key"], row["value"]) == (record.key, record.value)
        assert round(row["timestamp"].timestamp() * 1000) == record.timestamp
        assert row["headers"] == ([{"key": k, "value": v} for k, v in record.headers] or None)


def test_timestamp_type_column_and_schema_without_headers() -> None:
    buf = build_batch([(b"k", b"v", (), 1000)], timestamp_type=1, now_ms=5000)
    out = list(record_batches("t", 0, buf, list(iter_batches(buf)), start_offset=0, end_offset=10,
                              include_headers=False))
    assert out[0].schema == arrow_schema(False)
    row = out[0].to_pylist()[0]
    assert row["timestampType"] == 1 and round(row["timestamp"].timestamp() * 1000) == 5000


def test_a_record_whose_fields_overrun_its_length_is_corrupt() -> None:
    buf = bytearray(build_batch([(b"key", b"value", (), 1000)]))
    # The record starts after the 61-byte header: its length varint, then attributes...
    buf[61] -= 2  # declared length 2 bytes short of the content
    with pytest.raises(InvalidRecordError):
        list(record_batches("t", 0, bytes(buf), list(iter_batches(bytes(buf))), start_offset=0, end_offset=10,
                            include_headers=False))
