"""The walk over a records section that produce validation needs: each record's offset
delta, timestamp delta and key length, with Kafka's layout checks (`DefaultRecord`'s
partial read: every field, each header's key and value skipped, the record's size
matching its content, the declared count filling the section).

Two walks with the same checks and error messages: `record_scan.scan_section`, compiled
(numba, about 7 ns a record), once this process has loaded it (a node loads it off its
event loop at start, `load_compiled`); and `walk_python` (about 1 us a
record) until then, because importing numba and loading compiled code would hold the event
loop for about a second.
"""

from __future__ import annotations

import sys
from typing import Final

import numpy as np

from kmirror.records.batch import Buffer
from kmirror.records.record import InvalidRecordError, encode_record

ERRORS: Final = {
    1: "a record extends past its batch",
    2: "invalid record size",
    3: "record fields extend past the record",
    4: "record size does not match its content",
    5: "the declared records do not fill their batch",
    6: "varint longer than 10 bytes",
    7: "invalid header count",
    8: "invalid negative header key size",
}

RecordFields = tuple[np.ndarray, np.ndarray, np.ndarray]
"""Per record, in order: offset deltas, timestamp deltas, key lengths (-1: null key)."""

_COMPILED_MODULE: Final = "kmirror.records.record_scan"


def walk(data: Buffer, pos: int, end: int, count: int) -> RecordFields:
    """The `count` records of data[pos:end] (which they must fill); `InvalidRecordError`
    names the first layout error."""
    module = sys.modules.get(_COMPILED_MODULE)
    if module is not None and module.scan_section.signatures:
        return walk_compiled(data, pos, end, count)
    return walk_python(data, pos, end, count)


def load_compiled() -> None:
    """Import the compiled walk and load it, with the argument types `walk` gives it (from
    numba's cache, or compiled): about a second, so a node runs this off its event loop at
    start. `walk` takes the compiled walk from then on."""
    record = encode_record(0, 0, b"k", b"v")
    walk_compiled(record, 0, len(record), 1)


def walk_compiled(data: Buffer, pos: int, end: int, count: int) -> RecordFields:
    from kmirror.records import record_scan  # loaded already when `walk` takes this path

    # A read-only view, as the loaded compiled code was typed for (a writable one would compile anew)
    buf = np.frombuffer(memoryview(data).toreadonly(), dtype=np.uint8)
    fields = np.empty((record_scan.FIELDS, count), dtype=np.int64)
    error, _ = record_scan.scan_section(buf, pos, end, count, fields, 0)
    if error:
        raise InvalidRecordError(ERRORS[error])
    return fields[record_scan.OFFSET_DELTA], fields[record_scan.TS_DELTA], fields[record_scan.KEY_LEN]


def walk_python(data: Buffer, pos: int, end: int, count: int) -> RecordFields:
    offset_deltas = [0] * count
    timestamp_deltas = [0] * count
    key_lengths = [0] * count
    for i in range(count):
        length, p = _varint(data, pos, end, 1, 6)
        record_end = p + length
        if length < 1 or record_end > end:
            raise InvalidRecordError(ERRORS[1 if length >= 1 else 2])
        timestamp_deltas[i], p = _varint(data, p + 1, record_end)  # after the attributes byte
        offset_deltas[i], p = _varint(data, p, record_end)
        key_length, p = _varint(data, p, record_end)
        if key_length < -1:
            raise InvalidRecordError(ERRORS[3])
        key_lengths[i] = key_length
        value_length, p = _varint(data, p + max(key_length, 0), record_end)
        if value_length < -1:
            raise InvalidRecordError(ERRORS[3])
        header_count, p = _varint(data, p + max(value_length, 0), record_end)
        if header_count < 0:
            raise InvalidRecordError(ERRORS[7])
        for _ in range(header_count):
            header_key_length, p = _varint(data, p, record_end)
            if header_key_length < 0:
                raise InvalidRecordError(ERRORS[8])
            header_value_length, p = _varint(data, p + header_key_length, record_end)
            if header_value_length < -1:
                raise InvalidRecordError(ERRORS[3])
            p += max(header_value_length, 0)
        if p != record_end:
            raise InvalidRecordError(ERRORS[4])
        pos = record_end
    if pos != end:
        raise InvalidRecordError(ERRORS[5])
    return (np.array(offset_deltas, dtype=np.int64), np.array(timestamp_deltas, dtype=np.int64),
            np.array(key_lengths, dtype=np.int64))


def _varint(data: Buffer, pos: int, end: int, past_end: int = 3, too_long: int = 3) -> tuple[int, int]:
    """A zigzag varint of up to 10 bytes read as 64 bits, as the compiled walk reads it;
    errors `past_end` / `too_long` when it runs past `end` / is longer."""
    if pos < end and (byte := data[pos]) < 0x80:  # one byte: most fields of most records
        return (byte >> 1) ^ -(byte & 1), pos + 1
    result = 0
    for shift in range(0, 70, 7):
        if pos >= end:
            raise InvalidRecordError(ERRORS[past_end])
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            result &= (1 << 64) - 1
            return (result >> 1) ^ -(result & 1), pos
    raise InvalidRecordError(ERRORS[too_long])
