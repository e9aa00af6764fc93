"""Compiled record decoding equals the reference decoder, record by record; a record that
breaks Kafka's layout is refused with its reason."""

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


# One record after the 61-byte batch header: length varint (61), attributes (62), timestamp
# delta (63), offset delta (64), key length 3 (65, zigzag 6), key (66-68), value length 5
# (69, zigzag 10), value (70-74), header count (75).
@pytest.mark.parametrize(("position", "byte", "message"), [
    (61, 2 * 12, "record fields extend past the record"),  # declared length 2 bytes short of the content
    (61, 2 * 16, "a record extends past its batch"),  # 2 bytes longer than the batch holds
    (61, 0, "invalid record size"),
    (65, 3, "record fields extend past the record"),  # key length -2
    (65, 2 * 60, "record fields extend past the record"),  # key longer than the record
    (75, 1, "invalid header count"),  # -1 headers
    (75, 0x80, "record fields extend past the record"),  # a header count varint that does not end
    (60, 2, "a record extends past its batch"),  # records_count 2: the second is not there
    (60, 0, "the declared records do not fill their batch"),  # records_count 0: bytes left over
])
def test_a_record_that_breaks_kafkas_layout_is_corrupt(position: int, byte: int, message: str) -> None:
    buf = bytearray(build_batch([(b"key", b"value", (), 1000)]))
    assert (buf[61], buf[65], buf[69], buf[75], buf[60]) == (2 * 14, 6, 10, 0, 1)
    buf[position] = byte
    with pytest.raises(InvalidRecordError, match=message):
        list(record_batches("t", 0, bytes(buf), list(iter_batches(bytes(buf))), start_offset=0, end_offset=10,
                            include_headers=False))
