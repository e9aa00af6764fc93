"""How a retained batch is written by the cleaner (Kafka `MemoryRecords.filterTo`).

- every record kept and no delete horizon to set: the batch is copied byte for byte;
- otherwise the batch is rebuilt: base offset, last offset delta (so the producer's last
  sequence survives, Kafka `overrideLastOffset`), partition leader epoch, producer id,
  epoch and base sequence, timestamp type, transactional and control flags and the
  compression codec are kept; the kept records' bytes are copied unchanged (their offset
  and timestamp deltas stay valid because the base offset and base timestamp are kept)
  and recompressed with the batch's codec at Kafka's default level. When a delete horizon
  is set (KIP-534: the batch holds a tombstone or an empty transaction's marker) the base
  timestamp becomes the horizon, the DELETE_HORIZON attribute is set and each record's
  timestamp delta is re-encoded against it. The max timestamp is the kept records' largest
  (LogAppendTime batches keep theirs). The CRC is recomputed.
- a batch with no record kept that must stay (the last batch of an active producer, or the
  round's last batch) becomes an empty batch header (Kafka `writeEmptyHeader`).
"""

from __future__ import annotations

from typing import NamedTuple

from kmirror.records.batch import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    DELETE_HORIZON_FLAG_MASK,
    HEADER_STRUCT,
    MAGIC_V2,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    BatchHeader,
    Buffer,
    write_crc,
)
from kmirror.records.compression import compress, decompress
from kmirror.records.record import InvalidRecordError, decode_varint, encode_varint


class ScannedRecord(NamedTuple):
    """One record of a batch's (uncompressed) records section, located, not copied."""

    start: int  # position of its length varint in the section
    end: int
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    has_value: bool
    body_start: int  # position of the attributes byte (the timestamp delta follows it)


def _varint(section: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint, with the one- and two-byte cases (nearly every record field) inline."""
    b0 = section[pos]
    if b0 < 0x80:
        return (b0 >> 1) ^ -(b0 & 1), pos + 1
    b1 = section[pos + 1]
    if b1 < 0x80:
        n = (b0 & 0x7F) | (b1 << 7)
        return (n >> 1) ^ -(n & 1), pos + 2
    return decode_varint(section, pos)


_new_scanned = tuple.__new__


def scan_records(section: Buffer, count: int) -> list[ScannedRecord]:
    """Locate `count` records; only the fields the cleaner decides on are read (the key, the
    offset and timestamp deltas and whether the value is null). The cleaner's hot loop (see
    bench/cleaner.py): the one-byte varint case is decoded in line (record length, offset
    delta and key length of nearly every record; a length of 64 bytes or more takes two
    bytes, also in line for the record length), and records are built as tuples without the NamedTuple's Python
    constructor."""
    data = section if isinstance(section, bytes) else bytes(section)
    out: list[ScannedRecord] = []
    append = out.append
    pos = 0
    end = len(data)
    try:
        for _ in range(count):
            start = pos
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:  # 64 to 8191 bytes: two bytes
                n = (b & 0x7F) | (data[pos + 1] << 7)
                length = (n >> 1) ^ -(n & 1)
                pos += 2
            else:
                length, pos = _varint(data, pos)
            record_end = pos + length
            if length < 0 or record_end > end:
                raise InvalidRecordError(f"invalid record size {length}")
            body_start = pos
            b = data[pos + 1]  # after the attributes byte
            if b < 0x80:
                timestamp_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                timestamp_delta, pos = _varint(data, pos + 1)
            b = data[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                offset_delta, pos = _varint(data, pos)
            b = data[pos]
            if b < 0x80:
                key_length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                key_length, pos = _varint(data, pos)
            if key_length >= 0:
                key: bytes | None = data[pos:pos + key_length]
                pos += key_length
            else:
                key = None
            append(_new_scanned(ScannedRecord, (start, record_end, offset_delta, timestamp_delta, key,
                                                data[pos] != 0x01, body_start)))
            pos = record_end
    except IndexError:
        raise InvalidRecordError("record extends past its batch") from None
    return out


def scan_keys(section: Buffer, count: int) -> list[tuple[int, bytes | None]]:
    """(offset delta, key) of `count` records: what the key map needs, scanned as
    `scan_records` scans (same checks), nothing else built."""
    data = section if isinstance(section, bytes) else bytes(section)
    out: list[tuple[int, bytes | None]] = []
    append = out.append
    pos = 0
    end = len(data)
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:  # 64 to 8191 bytes: two bytes
                n = (b & 0x7F) | (data[pos + 1] << 7)
                length = (n >> 1) ^ -(n & 1)
                pos += 2
            else:
                length, pos = _varint(data, pos)
            record_end = pos + length
            if length < 0 or record_end > end:
                raise InvalidRecordError(f"invalid record size {length}")
            if data[pos + 1] < 0x80:  # the timestamp delta, after the attributes byte: skipped
                pos += 2
            else:
                pos = _varint(data, pos + 1)[1]
            b = data[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                offset_delta, pos = _varint(data, pos)
            b = data[pos]
            if b < 0x80:
                key_length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                key_length, pos = _varint(data, pos)
            if key_length >= 0:
                key: bytes | None = data[pos:pos + key_length]
                pos += key_length
            else:
                key = None
            if pos >= end:  # scan_records reads the value's length there
                raise IndexError
            append((offset_delta, key))
            pos = record_end
    except IndexError:
        raise InvalidRecordError("record extends past its batch") from None
    return out


def record_timestamp(header: BatchHeader, record: ScannedRecord) -> int:
    if header.timestamp_type == 1:
        return header.max_timestamp
    return header.base_timestamp + record.timestamp_delta


def records_of(buf: Buffer, pos: int, header: BatchHeader) -> bytes | memoryview:
    body = memoryview(buf)[pos + RECORD_BATCH_OVERHEAD:pos + header.size]
    return body if header.compression == 0 else decompress(header.compression, body)


def rebuild_batch(header: BatchHeader, section: Buffer, kept: list[ScannedRecord],
                  delete_horizon_ms: int | None) -> bytes:
    """The retained form of a batch with `kept` records (non-empty); see the module doc."""
    view = memoryview(section)
    if delete_horizon_ms is None:
        base_timestamp = header.base_timestamp
        body = b"".join(view[r.start:r.end] for r in kept)
        attributes = header.attributes
    else:
        base_timestamp = delete_horizon_ms
        parts = []
        deltas: dict[int, bytes] = {}  # a batch's records mostly share one timestamp
        for r in kept:
            # attributes byte, then the timestamp delta against the horizon, then the rest
            old_ts_end = decode_varint(section, r.body_start + 1)[1]
            timestamp = record_timestamp(header, r)
            delta = deltas.get(timestamp)
            if delta is None:
                delta = deltas[timestamp] = encode_varint(timestamp - delete_horizon_ms)
            inner = bytes(view[r.body_start:r.body_start + 1]) + delta + bytes(view[old_ts_end:r.end])
            parts.append(encode_varint(len(inner)) + inner)
        body = b"".join(parts)
        attributes = header.attributes | DELETE_HORIZON_FLAG_MASK
    if header.timestamp_type == 1:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = header.base_timestamp + max(r.timestamp_delta for r in kept)
    codec = header.attributes & COMPRESSION_CODEC_MASK
    if codec:
        body = compress(codec, body)
    buf = bytearray(RECORD_BATCH_OVERHEAD + len(body))
    HEADER_STRUCT.pack_into(
        buf, 0, header.base_offset, len(buf) - 12, header.partition_leader_epoch, MAGIC_V2, 0, attributes,
        header.last_offset_delta, base_timestamp, max_timestamp, header.producer_id, header.producer_epoch,
        header.base_sequence, len(kept))
    buf[RECORD_BATCH_OVERHEAD:] = body
    write_crc(buf)
    return bytes(buf)


def empty_batch(header: BatchHeader) -> bytes:
    """Kafka `DefaultRecordBatch.writeEmptyHeader`: no records, no compression, the base
    and last offsets, producer fields, epoch and flags of `header`; both timestamps are its
    max timestamp."""
    attributes = header.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK)
    buf = bytearray(RECORD_BATCH_OVERHEAD)
    HEADER_STRUCT.pack_into(
        buf, 0, header.base_offset, RECORD_BATCH_OVERHEAD - 12, header.partition_leader_epoch, MAGIC_V2, 0,
        attributes, header.last_offset_delta, header.max_timestamp, header.max_timestamp, header.producer_id,
        header.producer_epoch, header.base_sequence, 0)
    write_crc(buf)
    return bytes(buf)


