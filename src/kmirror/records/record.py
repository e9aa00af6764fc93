"""Records inside a v2 batch (Kafka `DefaultRecord`) and zigzag varint coding.

Record layout:

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
    keyLength varint (-1 = null) | key | valueLength varint (-1 = null) | value |
    headerCount varint | [headerKeyLength varint | key utf-8 | headerValueLength varint | value]...

Deltas are relative to the batch's base offset and base timestamp. For a LogAppendTime batch
every record's timestamp is the batch's max timestamp (Kafka `DefaultRecordBatch`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from kmirror.records.batch import (
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    Buffer,
    CorruptRecordError,
    iter_batches,
    read_header,
)
from kmirror.records.compression import decompress

Header = tuple[str, bytes | None]


class InvalidRecordError(CorruptRecordError):
    """A record inside a batch is malformed (Kafka's InvalidRecordException, INVALID_RECORD)."""


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


@dataclass(frozen=True, slots=True)
class RecordEntry:
    """A record as stored, with deltas relative to its batch (what validation inspects)."""

    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


# --- zigzag varints (Kafka ByteUtils.writeVarint / writeVarlong) -----------------------------

def encode_varint(value: int) -> bytes:
    """Zigzag-encode a signed int64 (varint and varlong share the wire format)."""
    n = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def size_of_varint(value: int) -> int:
    n = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


def decode_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint at `pos`; returns (value, next position)."""
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise InvalidRecordError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise InvalidRecordError("varint longer than 10 bytes")


# --- encoding ---------------------------------------------------------------------------------

def encode_record(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                  headers: Sequence[Header] = ()) -> bytes:
    """One record, length-prefixed, with attributes 0 (unused in v2)."""
    body = bytearray(b"\x00")
    body += encode_varint(timestamp_delta)
    body += encode_varint(offset_delta)
    _append_bytes(body, key)
    _append_bytes(body, value)
    body += encode_varint(len(headers))
    for header_key, header_value in headers:
        _append_bytes(body, header_key.encode())
        _append_bytes(body, header_value)
    return encode_varint(len(body)) + bytes(body)


def _append_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out += encode_varint(-1)
    else:
        out += encode_varint(len(data))
        out += data


# --- decoding ---------------------------------------------------------------------------------

def decode_entries(data: Buffer, count: int) -> list[RecordEntry]:
    """Decode exactly `count` records from an (uncompressed) records section.

    Kafka rejects a batch whose records do not fill it exactly or whose declared count is
    wrong ("Incorrect declared batch size"): both raise `InvalidRecordError` here.
    """
    entries = []
    pos = 0
    end = len(data)
    for _ in range(count):
        entry, pos = _decode_entry(data, pos, end)
        entries.append(entry)
    if pos != end:
        raise InvalidRecordError(f"{end - pos} bytes remain after the declared {count} records")
    return entries


def _decode_entry(data: Buffer, pos: int, end: int) -> tuple[RecordEntry, int]:
    length, pos = decode_varint(data, pos)
    record_end = pos + length
    if length < 0 or record_end > end:
        raise InvalidRecordError(f"invalid record size {length}")
    pos += 1  # attributes: unused in v2
    timestamp_delta, pos = decode_varint(data, pos)
    offset_delta, pos = decode_varint(data, pos)
    key, pos = _read_bytes(data, pos, record_end)
    value, pos = _read_bytes(data, pos, record_end)
    header_count, pos = decode_varint(data, pos)
    if header_count < 0:
        raise InvalidRecordError(f"invalid number of record headers {header_count}")
    headers = []
    for _ in range(header_count):
        raw_key, pos = _read_bytes(data, pos, record_end)
        if raw_key is None:
            raise InvalidRecordError("null header key")
        header_value, pos = _read_bytes(data, pos, record_end)
        try:
            headers.append((raw_key.decode(), header_value))
        except UnicodeDecodeError as error:
            raise InvalidRecordError("header key is not UTF-8") from error
    if pos != record_end:
        raise InvalidRecordError(f"record size {length} does not match its content")
    return RecordEntry(offset_delta, timestamp_delta, key, value, tuple(headers)), pos


def _read_bytes(data: Buffer, pos: int, limit: int) -> tuple[bytes | None, int]:
    size, pos = decode_varint(data, pos)
    if size < 0:
        return None, pos
    if pos + size > limit:
        raise InvalidRecordError("record field extends past the record")
    return bytes(data[pos:pos + size]), pos + size


def records_section(buf: Buffer, pos: int, header: BatchHeader,
                    max_bytes: int | None = None) -> bytes | memoryview:
    """The batch's records, decompressed when the batch is compressed (no copy otherwise);
    more than `max_bytes` decompressed raises `DecompressedTooLarge`."""
    body = memoryview(buf)[pos + RECORD_BATCH_OVERHEAD:pos + header.size]
    if header.compression == 0:
        return body
    return decompress(header.compression, body, max_bytes)


def decode_records(buf: Buffer, pos: int = 0) -> list[Record]:
    """All records of the one batch at `pos`, with absolute offsets and timestamps."""
    header = read_header(buf, pos)
    if pos + header.size > len(buf):
        raise CorruptRecordError(f"batch at position {pos} is truncated")
    entries = decode_entries(records_section(buf, pos, header), header.records_count)
    base_offset = header.base_offset
    if header.timestamp_type == 1:
        return [Record(base_offset + e.offset_delta, header.max_timestamp, e.key, e.value, e.headers)
                for e in entries]
    base_timestamp = header.base_timestamp
    return [Record(base_offset + e.offset_delta, base_timestamp + e.timestamp_delta, e.key, e.value, e.headers)
            for e in entries]


def iter_records(buf: Buffer, *, include_control: bool = False,
                 allow_truncated_tail: bool = True) -> Iterator[Record]:
    """Records of every batch in `buf` (e.g. a Fetch response's records), in offset order.

    Control batches (transaction markers) are skipped unless asked for, as Kafka consumers
    do; a partial batch at the end (cut at the fetch's max_bytes) is ignored by default.
    """
    for pos, header in iter_batches(buf, allow_truncated_tail=allow_truncated_tail):
        if header.is_control and not include_control:
            continue
        yield from decode_records(buf, pos)
