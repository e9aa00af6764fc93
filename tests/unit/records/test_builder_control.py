"""Batch building details and control batches."""

from __future__ import annotations

import struct

import pytest

from kmirror.records.batch import crc_ok, read_header
from kmirror.records.builder import SimpleRecord, build_batch
from kmirror.records.control import (
    ControlType,
    build_control_batch,
    parse_control_key,
    parse_end_txn_marker,
    read_control_type,
)
from kmirror.records.record import InvalidRecordError, decode_records


def test_header_fields_set_by_builder() -> None:
    buf = build_batch([(b"a", b"1", (), 30), (b"b", b"2", (), 10), (None, b"3", (), 20)], base_offset=40,
                      partition_leader_epoch=3, producer_id=11, producer_epoch=2, base_sequence=6,
                      is_transactional=True, compression=4)
    h = read_header(buf)
    assert (h.base_offset, h.last_offset, h.records_count, h.partition_leader_epoch) == (40, 42, 3, 3)
    assert (h.base_timestamp, h.max_timestamp) == (30, 30)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (11, 2, 6, 8)
    assert h.is_transactional and not h.is_control and h.compression == 4
    assert h.size == len(buf) and crc_ok(buf)


def test_missing_timestamps_take_now() -> None:
    buf = build_batch([SimpleRecord(b"k", b"v")], now_ms=1234)
    assert decode_records(buf)[0].timestamp == 1234
    with pytest.raises(ValueError):
        build_batch([SimpleRecord(b"k", b"v")])


def test_log_append_time_build() -> None:
    buf = build_batch([SimpleRecord(b"k", b"v", (), 5)], timestamp_type=1, now_ms=77)
    h = read_header(buf)
    assert (h.timestamp_type, h.max_timestamp) == (1, 77)
    assert decode_records(buf)[0].timestamp == 77


def test_empty_batch_is_refused() -> None:
    with pytest.raises(ValueError):
        build_batch([])


@pytest.mark.parametrize("control_type", [ControlType.ABORT, ControlType.COMMIT])
def test_end_transaction_marker(control_type: ControlType) -> None:
    buf = build_control_batch(control_type, producer_id=5, producer_epoch=1, timestamp_ms=100, base_offset=9,
                              coordinator_epoch=4)
    h = read_header(buf)
    assert h.is_control and h.is_transactional and (h.producer_id, h.producer_epoch, h.base_offset) == (5, 1, 9)
    assert h.base_sequence == -1 and h.records_count == 1
    assert read_control_type(buf) is control_type
    (record,) = decode_records(buf)
    assert record.key == struct.pack(">hh", 0, control_type)
    assert record.value == struct.pack(">hi", 0, 4)
    assert parse_end_txn_marker(record.value) == 4


def test_other_control_types_are_not_transactional() -> None:
    buf = build_control_batch(ControlType.MIRROR_PID_RESET, -1, -1, 1, value=b"payload")
    h = read_header(buf)
    assert h.is_control and not h.is_transactional
    assert read_control_type(buf) is ControlType.MIRROR_PID_RESET
    assert decode_records(buf)[0].value == b"payload"


def test_unknown_control_type_is_tolerated_like_kafka() -> None:
    assert parse_control_key(struct.pack(">hh", 0, 42)) is ControlType.UNKNOWN
    with pytest.raises(InvalidRecordError):
        parse_control_key(b"\x00")
    with pytest.raises(ValueError):
        build_control_batch(ControlType.UNKNOWN, 1, 1, 1)


def test_read_control_type_of_a_data_batch_fails() -> None:
    from kmirror.records.batch import CorruptRecordError

    with pytest.raises(CorruptRecordError):
        read_control_type(build_batch([(b"k", b"v", (), 1)]))
