"""Record decoding against kafka-python's independent builder, varints, malformed records."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kmirror.records.batch import set_log_append_time
from kmirror.records.builder import SimpleRecord, build_batch
from kmirror.records.record import (
    InvalidRecordError,
    Record,
    decode_entries,
    decode_records,
    decode_varint,
    encode_record,
    encode_varint,
    iter_records,
    size_of_varint,
)


def foreign_batch(compression: int, base_offset: int = 0) -> tuple[bytes, list[Record]]:
    builder = DefaultRecordBatchBuilder(2, compression, False, -1, -1, -1, batch_size=1 << 20)
    expected = []
    for i in range(20):
        key = None if i % 5 == 0 else f"key-{i}".encode()
        value = None if i % 7 == 3 else (f"value-{i}-" * 40).encode()
        headers = [("trace", b"abc"), ("empty", None)] if i % 2 else []
        ts = 1_700_000_000_000 + i * 3 - (50 if i == 4 else 0)
        builder.append(i, ts, key, value, headers)
        expected.append(Record(base_offset + i, ts, key, value, tuple(headers)))
    buf = bytearray(builder.build())
    buf[0:8] = base_offset.to_bytes(8, "big")
    return bytes(buf), expected


@pytest.mark.parametrize("codec", [0, 1, 3, 4])  # kafka-python has no snappy library here
def test_decode_matches_kafka_python_builder(codec: int) -> None:
    buf, expected = foreign_batch(codec, base_offset=500)
    assert decode_records(buf) == expected


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_build_then_decode(codec: int) -> None:
    records = [SimpleRecord(b"k", b"v" * 300, (("h", b"1"),), 10), SimpleRecord(None, None, (), 5)]
    buf = build_batch(records, compression=codec, base_offset=7)
    assert decode_records(buf) == [Record(7, 10, b"k", b"v" * 300, (("h", b"1"),)), Record(8, 5, None, None, ())]


@pytest.mark.parametrize("codec", [0, 1, 3, 4])
def test_kafka_python_reads_our_batches(codec: int) -> None:
    records = [SimpleRecord(f"k{i}".encode(), b"x" * i, (("a", None),), 100 + i) for i in range(10)]
    buf = build_batch(records, compression=codec, base_offset=3, producer_id=9, producer_epoch=0, base_sequence=4)
    batch = MemoryRecords(buf).next_batch()
    assert batch.validate_crc()
    assert (batch.producer_id, batch.base_sequence, batch.compression_type) == (9, 4, codec)
    got = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    assert got == [(3 + i, 100 + i, f"k{i}".encode(), b"x" * i, [("a", None)]) for i in range(10)]


def test_log_append_time_batches_report_max_timestamp() -> None:
    buf = bytearray(build_batch([(b"a", b"1", (), 10), (b"b", b"2", (), 20)]))
    set_log_append_time(buf, 0, 99_999)
    assert [r.timestamp for r in decode_records(buf)] == [99_999, 99_999]


def test_iter_records_skips_control_batches_and_partial_tail() -> None:
    from kmirror.records.control import ControlType, build_control_batch

    data = build_batch([(b"a", b"1", (), 10)], base_offset=0)
    marker = build_control_batch(ControlType.COMMIT, 1, 0, 11, base_offset=1)
    more = build_batch([(b"b", b"2", (), 12)], base_offset=2)
    fetched = data + marker + more + more[:30]
    assert [r.offset for r in iter_records(fetched)] == [0, 2]
    assert [r.offset for r in iter_records(fetched, include_control=True)] == [0, 1, 2]


@pytest.mark.parametrize("value", [0, 1, -1, 63, -64, 64, 300, -301, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)])
def test_varint_round_trip(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) == size_of_varint(value)
    assert decode_varint(encoded + b"\xff", 0) == (value, len(encoded))


def test_varint_known_bytes() -> None:
    # Zigzag: 0->0, -1->1, 1->2, -64->127, 64->128 (two bytes).
    assert [encode_varint(v) for v in (0, -1, 1, -64, 64)] == [b"\x00", b"\x01", b"\x02", b"\x7f", b"\x80\x01"]


def test_truncated_varint_is_invalid() -> None:
    with pytest.raises(InvalidRecordError):
        decode_varint(b"\x80\x80", 0)
    with pytest.raises(InvalidRecordError):
        decode_varint(b"\xff" * 11, 0)


def test_record_count_mismatch_is_invalid() -> None:
    body = encode_record(0, 0, b"k", b"v") + encode_record(1, 0, b"k", b"v")
    assert len(decode_entries(body, 2)) == 2
    with pytest.raises(InvalidRecordError):
        decode_entries(body, 1)
    with pytest.raises(InvalidRecordError):
        decode_entries(body, 3)


def test_record_length_must_match_content() -> None:
    record = bytearray(encode_record(0, 0, b"k", b"v"))
    record[0] += 2  # declares two more bytes than its fields use
    with pytest.raises(InvalidRecordError):
        decode_entries(bytes(record) + b"\x00\x00", 1)
