"""The walk over a records section that produce validation needs: each record's timestamp
delta and whether it has a key, with Kafka's layout checks (`DefaultRecord`'s partial read:
every field, each header's key and value skipped, the record's size matching its content,
the declared count filling the section) and the inner offset deltas 0, 1, 2, ... that
kmirror requires (it never rebuilds a batch). The first error in record order is raised as
`InvalidRecordError`.

Two walks with the same checks and messages: `record_scan.scan_section`, compiled (numba,
7-11 ns a record), once this process has loaded it (a node loads it off its event loop at
start, `load_compiled`); and `walk_python` (about 1 us a record) until `load_compiled` has
returned, because importing numba and loading compiled code would hold the event loop for
about a second. A section of more records than `_PYTHON_WALK_MAX_RECORDS` loads the compiled
walk first instead, as a hostile batch would hold the loop longer in Python. (While another
thread imports `record_scan`, the module is already in `sys.modules`, half initialized: the
flag, not the module's presence, says the walk is ready.)
The compiled walk goes `_CHUNK` records at a time, so its memory is 9 bytes a record
whatever the count a batch declares (a 64 MiB section holds up to 6.8 million records).
"""

from __future__ import annotations

import contextlib
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

RecordFields = tuple[np.ndarray, np.ndarray]
"""Per record, in order: timestamp deltas (int64), null key (bool)."""

_CHUNK: Final = 1 << 16
_LAYOUT_FILLS_NOT: Final = 5  # ERRORS: records remain after the declared count (or a chunk of it)
_SMALLEST_RECORD: Final = 7  # bytes: its length, attributes, timestamp and offset deltas, key, value, headers
_compiled_loaded = False  # `load_compiled` has returned
# More records than this wait for the compiled walk (loaded from numba's cache in a fraction of
# a second, while the node's worker thread is already loading it) rather than take the Python
# walk, about 1 us a record on the event loop: 64 MiB of empty records would hold it 8 s.
_PYTHON_WALK_MAX_RECORDS: Final = 200_000


def walk(data: Buffer, pos: int, end: int, count: int) -> RecordFields:
    """The `count` records of data[pos:end], which they must fill."""
    if not _compiled_loaded and _fitting(count, pos, end) > _PYTHON_WALK_MAX_RECORDS:
        with contextlib.suppress(Exception):  # without numba, the Python walk it is
            load_compiled()
    if _compiled_loaded:
        return walk_compiled(data, pos, end, count)
    return walk_python(data, pos, end, count)


def _fitting(count: int, pos: int, end: int) -> int:
    """How many of the `count` records data[pos:end] can hold at most, whatever the count says."""
    return min(max(count, 0), max(end - pos, 0) // _SMALLEST_RECORD + 1)


def load_compiled() -> None:
    """Import the compiled walk and load it, with the argument types `walk` gives it (from
    numba's cache, or compiled): about a second, so a node runs this off its event loop at
    start. `walk` takes the compiled walk from then on."""
    global _compiled_loaded
    record = encode_record(0, 0, b"k", b"v")
    walk_compiled(record, 0, len(record), 1)
    _compiled_loaded = True


def walk_compiled(data: Buffer, pos: int, end: int, count: int) -> RecordFields:
    from kmirror.records import record_scan  # loaded already when `walk` takes this path

    # A read-only view, as the loaded compiled code was typed for (a writable one would compile anew)
    buf = np.frombuffer(memoryview(data).toreadonly(), dtype=np.uint8)
    count = max(count, 0)
    fields = np.empty((record_scan.FIELDS, min(count, _CHUNK)), dtype=np.int64)
    # No more records than fit the section can be walked, whatever the count a batch declares
    fitting = _fitting(count, pos, end)
    timestamp_deltas = np.empty(fitting, dtype=np.int64)
    keyless = np.empty(fitting, dtype=np.bool_)
    done = 0
    while True:
        n = min(_CHUNK, count - done)
        error, walked = record_scan.scan_section(buf, pos, end, n, fields, 0)
        more = done + n < count
        if error == _LAYOUT_FILLS_NOT and more:
            error = 0  # the records of the next chunks follow
        _check_offset_deltas(fields[record_scan.OFFSET_DELTA, :walked], done)
        if error:
            raise InvalidRecordError(ERRORS[error])
        timestamp_deltas[done:done + n] = fields[record_scan.TS_DELTA, :n]
        keyless[done:done + n] = fields[record_scan.KEY_LEN, :n] < 0
        done += n
        if not more:
            return timestamp_deltas, keyless
        pos = int(fields[record_scan.RECORD_END, n - 1])


def walk_python(data: Buffer, pos: int, end: int, count: int) -> RecordFields:
    timestamp_deltas: list[int] = []
    keyless: list[bool] = []
    for i in range(count):
        length, p = _varint(data, pos, end, 1, 6)
        record_end = p + length
        if length < 1 or record_end > end:
            raise InvalidRecordError(ERRORS[1 if length >= 1 else 2])
        timestamp_delta, p = _varint(data, p + 1, record_end)  # after the attributes byte
        offset_delta, p = _varint(data, p, record_end)
        key_length, p = _varint(data, p, record_end)
        if key_length < -1:
            raise InvalidRecordError(ERRORS[3])
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
        if offset_delta != i:
            raise _misplaced(offset_delta, i)
        timestamp_deltas.append(timestamp_delta)
        keyless.append(key_length < 0)
        pos = record_end
    if pos != end:
        raise InvalidRecordError(ERRORS[5])
    return np.array(timestamp_deltas, dtype=np.int64), np.array(keyless, dtype=np.bool_)


def _check_offset_deltas(offset_deltas: np.ndarray, first: int) -> None:
    misplaced = np.flatnonzero(offset_deltas != np.arange(first, first + len(offset_deltas)))
    if misplaced.size:
        index = int(misplaced[0])
        raise _misplaced(int(offset_deltas[index]), first + index)


def _misplaced(offset_delta: int, index: int) -> InvalidRecordError:
    return InvalidRecordError(f"inner record offset delta {offset_delta} at index {index}: "
                              "offsets must be consecutive from 0")


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
