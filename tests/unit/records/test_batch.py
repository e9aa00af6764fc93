"""RecordBatch v2 header parsing, walking, CRC and in-place patching.

Batches come from kafka-python's pure-Python builder: an implementation we did not write.
"""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from kmirror.records.batch import (
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    UnsupportedMagicError,
    crc_ok,
    increment_sequence,
    iter_batches,
    read_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    valid_prefix,
)


def kafka_python_batch(n: int = 3, *, compression: int = 0, producer_id: int = -1, producer_epoch: int = -1,
                       base_sequence: int = -1, transactional: bool = False, ts0: int = 1_700_000_000_000,
                       pad: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(2, compression, transactional, producer_id, producer_epoch,
                                        base_sequence, batch_size=1 << 20)
    for i in range(n):
        builder.append(i, ts0 + i * 10, f"k{i}".encode(), f"value-{i}".encode() + b"a" * pad, [("h", b"x")])
    return bytes(builder.build())


def test_header_fields_of_a_foreign_batch() -> None:
    buf = kafka_python_batch(3, producer_id=7, producer_epoch=2, base_sequence=5, transactional=True)
    h = read_header(buf)
    assert h.size == len(buf)
    assert (h.base_offset, h.magic, h.last_offset_delta, h.records_count) == (0, 2, 2, 3)
    assert (h.base_timestamp, h.max_timestamp) == (1_700_000_000_000, 1_700_000_000_020)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (7, 2, 5, 7)
    assert h.is_transactional and not h.is_control and h.compression == 0 and h.timestamp_type == 0
    assert h.has_producer_id
    assert (h.last_offset, h.next_offset) == (2, 3)
    assert crc_ok(buf)


def test_compression_bits_are_exposed() -> None:
    for codec in (1, 3, 4):  # kafka-python has no snappy library installed here
        assert read_header(kafka_python_batch(2, compression=codec, pad=500)).compression == codec


def test_sequence_wraps_like_kafka() -> None:
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(2**31 - 2, 3) == 1
    assert increment_sequence(10, 4) == 14


def test_iter_batches_walks_concatenated_batches() -> None:
    a, b = kafka_python_batch(2), kafka_python_batch(5)
    positions = [(pos, h.records_count) for pos, h in iter_batches(a + b)]
    assert positions == [(0, 2), (len(a), 5)]
    assert list(iter_batches(b"")) == []


def test_iter_batches_is_strict_about_a_truncated_tail() -> None:
    a, b = kafka_python_batch(2), kafka_python_batch(5)
    with pytest.raises(CorruptRecordError):
        list(iter_batches(a + b[:-1]))
    with pytest.raises(CorruptRecordError):
        list(iter_batches(a + b[:20]))
    assert [p for p, _ in iter_batches(a + b[:-1], allow_truncated_tail=True)] == [0]
    assert [p for p, _ in iter_batches(a + b[:20], allow_truncated_tail=True)] == [0]


def test_length_smaller_than_header_is_corrupt() -> None:
    buf = bytearray(kafka_python_batch(1))
    struct.pack_into(">i", buf, 8, RECORD_BATCH_OVERHEAD - 13)
    with pytest.raises(CorruptRecordError):
        read_header(buf)
    with pytest.raises(CorruptRecordError):
        list(iter_batches(buf, allow_truncated_tail=True))


def test_legacy_magic_is_detected() -> None:
    # A magic-1 MessageSet entry: offset, size, crc, magic, attributes, timestamp, key, value.
    body = struct.pack(">bbqii", 1, 0, 123, -1, 1) + b"v"
    legacy = struct.pack(">qiI", 42, len(body) + 4, 0) + body
    with pytest.raises(UnsupportedMagicError) as info:
        read_header(legacy)
    assert info.value.magic == 1
    h = read_header(legacy, require_v2=False)
    assert (h.magic, h.base_offset, h.size) == (1, 42, len(legacy))
    with pytest.raises(UnsupportedMagicError):
        list(iter_batches(legacy))
    assert valid_prefix(legacy) == (0, [])


def test_valid_prefix_stops_at_bad_crc() -> None:
    a, b, c = kafka_python_batch(1), bytearray(kafka_python_batch(2)), kafka_python_batch(3)
    b[-1] ^= 0xFF
    n, headers = valid_prefix(a + bytes(b) + c)
    assert n == len(a)
    assert [h.records_count for h in headers] == [1]


def test_offset_and_epoch_patches_keep_crc() -> None:
    buf = bytearray(kafka_python_batch(3))
    set_base_offset(buf, 0, 1_000)
    set_partition_leader_epoch(buf, 0, 9)
    h = read_header(buf)
    assert (h.base_offset, h.partition_leader_epoch, h.last_offset) == (1_000, 9, 1_002)
    assert crc_ok(buf)


def test_patches_work_on_a_memoryview_at_a_position() -> None:
    a, b = kafka_python_batch(1), kafka_python_batch(2)
    buf = bytearray(a + b)
    view = memoryview(buf)
    set_base_offset(view, len(a), 77)
    assert [h.base_offset for _, h in iter_batches(buf)] == [0, 77]
    assert crc_ok(buf, len(a))


def test_log_append_time_sets_type_and_max_timestamp_and_crc() -> None:
    buf = bytearray(kafka_python_batch(3))
    before = read_header(buf)
    set_log_append_time(buf, 0, 1_800_000_000_000)
    after = read_header(buf)
    assert after.timestamp_type == 1
    assert after.max_timestamp == 1_800_000_000_000
    assert after.base_timestamp == before.base_timestamp
    assert after.crc != before.crc
    assert crc_ok(buf)


def test_crc_ok_false_when_batch_is_incomplete() -> None:
    buf = kafka_python_batch(3)
    assert not crc_ok(buf[:-1], 0, read_header(buf))


def test_header_is_a_value() -> None:
    h = read_header(kafka_python_batch(1))
    assert isinstance(h, BatchHeader)
    with pytest.raises(AttributeError):
        h.base_offset = 3  # type: ignore[misc]


def test_cut_within_first_batch_tells_a_cut_batch_from_whole_or_malformed_bytes():
    from kmirror.records.batch import cut_within_first_batch
    from kmirror.records.builder import build_batch

    whole = build_batch([(b"k", b"v" * 100, (), 1)] * 2)
    assert [cut_within_first_batch(whole[:n]) for n in (1, 16, 17, 60, 61, len(whole) - 1)] == [True] * 6
    assert not cut_within_first_batch(b"")
    assert not cut_within_first_batch(whole)
    assert not cut_within_first_batch(whole + whole[:30])  # a whole batch, then a cut one
    legacy = bytearray(whole)
    legacy[16] = 1  # magic 1: not the start of a v2 batch
    assert not cut_within_first_batch(bytes(legacy[:40]))
    short = bytearray(whole)
    short[8:12] = (10).to_bytes(4, "big")  # a batch length below the header size
    assert not cut_within_first_batch(bytes(short[:80]))


def test_cut_within_first_batch_agrees_with_the_parsed_header_on_every_prefix_and_length():
    from kmirror.records.batch import cut_within_first_batch, read_header
    from kmirror.records.builder import build_batch

    def by_header(buf: bytes) -> bool:
        if len(buf) <= 16:
            return len(buf) > 0
        try:
            return read_header(buf).size > len(buf)
        except UnsupportedMagicError:
            return False
        except CorruptRecordError:
            return len(buf) < RECORD_BATCH_OVERHEAD

    whole = build_batch([(b"k", b"v" * 100, (), 1)] * 2)
    for magic in (0, 1, 2, 3, 0xFE):
        for length in (-5, 0, 10, 48, 49, 50, len(whole) - 12, len(whole), 1 << 30):
            buf = bytearray(whole)
            buf[16] = magic
            buf[8:12] = length.to_bytes(4, "big", signed=True)
            for n in range(len(buf) + 1):
                assert cut_within_first_batch(bytes(buf[:n])) == by_header(bytes(buf[:n])), (magic, length, n)
