"""The per-record walk over decompressed Kafka v2 records, compiled (numba).

Each record's position depends on the previous record's length, so the walk is sequential:
in Python it cost about as much as decompression itself. Compiled, one pass reads every
record's fields (Kafka's `DefaultRecord` layout: length, attributes, timestampDelta,
offsetDelta, key, value, header count) into arrays, and a second copies keys or values
into one contiguous Arrow value buffer. Both work one decompressed records section at a
time, where the codec left it (the sections of a chunk are never joined into one buffer),
and release the GIL, so the fetch thread keeps running beside them.

Layout checks are Kafka's (`DefaultRecord.readFrom`): a record whose fields do not end
exactly at its length, a record past its batch, or records that do not fill the batch are
reported as an error code; `arrow_records` raises `InvalidRecordError` with its message.
Compiled code is cached next to this module (or in numba's user cache when that is not
writable), so a Spark Python worker compiles it once, not per task.
"""

from __future__ import annotations

from typing import Any, Final

import numpy as np
from numba import njit, types  # type: ignore[import-untyped]
from numba.core import cgutils  # type: ignore[import-untyped]
from numba.extending import intrinsic  # type: ignore[import-untyped]

from kmirror.records import compiled_cache  # noqa: F401  (registers the cache locator first)

OK: Final = 0

# Columns of the scan's output, one int64 row each.
TS_DELTA, OFFSET_DELTA, KEY_START, KEY_LEN, VALUE_START, VALUE_LEN, HEADER_START, RECORD_END, HEADER_COUNT = range(9)
FIELDS: Final = 9


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def varint(buf: np.ndarray, pos: int, end: int) -> tuple[int, int]:
    """A zigzag varint (up to 64 bits) at `pos`: (value, position after it); position -1 when
    it runs past `end`, -2 when longer than 10 bytes."""
    if pos < end:
        first = np.int64(buf[pos])
        if first < 0x80:  # one byte: nearly every length, delta and count of a record
            return (first >> 1) ^ -(first & 1), pos + 1  # type: ignore[return-value]
    result = np.uint64(0)
    shift = np.uint64(0)
    for _ in range(10):
        if pos >= end:
            return 0, -1
        b = np.uint64(buf[pos])
        pos += 1
        result |= (b & np.uint64(0x7F)) << shift
        if b < np.uint64(0x80):
            return np.int64(result >> np.uint64(1)) ^ -np.int64(result & np.uint64(1)), pos  # type: ignore[return-value]
        shift += np.uint64(7)
    return 0, -2


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def scan_records(buf: np.ndarray, sizes: np.ndarray, counts: np.ndarray, out: np.ndarray,
                 first: int) -> tuple[int, int]:
    """Walk `counts[i]` records in each section of `sizes[i]` bytes, back to back in `buf`,
    filling `out[FIELD, first + record]`. Returns (OK or an error code, records read)."""
    pos = 0
    n = first
    for s in range(len(sizes)):
        error, n = scan_section(buf, pos, pos + sizes[s], counts[s], out, n)
        if error != 0:
            return error, n - first
        pos += sizes[s]
    return 0, n - first


_LONG = -3  # `_short_varint`: a varint of more than three bytes, for `varint` to read


@njit(cache=True, nogil=True, inline="always")  # type: ignore[untyped-decorator]
def _short_varint(buf: np.ndarray, pos: int, end: int) -> tuple[int, int]:
    """`varint` for varints of one to three bytes (every count, delta and length under 1 Mi),
    branch-free past the first byte: (value, position after it), -1 past `end`, `_LONG`
    when longer. As compiled, a loop or a call past the first byte, even one never taken,
    made the whole record walk about 8x slower (77 against 7 ns a record of 1 KiB), so
    the caller reads a longer varint with `varint` when this answers a negative position."""
    if pos >= end:
        return 0, -1
    first = np.int64(buf[pos])
    if first < 0x80:
        return (first >> 1) ^ -(first & 1), pos + 1  # type: ignore[return-value]
    # Past `end`, the first byte is read again: its high bit makes the answer `_LONG`
    second = np.int64(buf[pos + 1 if pos + 1 < end else pos])
    third = np.int64(buf[pos + 2 if pos + 2 < end else pos])
    two = second < 0x80
    v = (first & 0x7F) | ((second if two else (second & 0x7F) | (third << 7)) << 7)
    return (v >> 1) ^ -(v & 1), (pos + 2 if two else (pos + 3 if third < 0x80 else _LONG))  # type: ignore[return-value]


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def scan_section(buf: np.ndarray, pos: int, section_end: int, count: int, out: np.ndarray, n: int) -> tuple[int, int]:
    """Walk the `count` records of one records section, buf[pos:section_end], into
    `out[FIELD, n:]`. Returns (OK or an error code, the next free column of `out`).
    Each field is read by `_short_varint`, and by `varint` only when that answers a
    negative position (written out per field: see `_short_varint`)."""
    for _ in range(count):
        length, p = _short_varint(buf, pos, section_end)
        if p < 0:
            length, p = varint(buf, pos, section_end)
            if p < 0:
                return (1 if p == -1 else 6), n
        record_end = p + length
        if length < 1 or record_end > section_end:
            return (1 if length >= 1 else 2), n
        q = p + 1  # attributes (unused in v2)
        ts_delta, p = _short_varint(buf, q, record_end)
        if p < 0:
            ts_delta, p = varint(buf, q, record_end)
            if p < 0:
                return 3, n
        q = p
        offset_delta, p = _short_varint(buf, q, record_end)
        if p < 0:
            offset_delta, p = varint(buf, q, record_end)
            if p < 0:
                return 3, n
        q = p
        key_len, p = _short_varint(buf, q, record_end)
        if p < 0:
            key_len, p = varint(buf, q, record_end)
            if p < 0:
                return 3, n
        if key_len < -1:
            return 3, n
        key_start = p
        if key_len > 0:
            p += key_len
        q = p
        value_len, p = _short_varint(buf, q, record_end)
        if p < 0:
            value_len, p = varint(buf, q, record_end)
            if p < 0:
                return 3, n
        if value_len < -1:
            return 3, n
        value_start = p
        if value_len > 0:
            p += value_len
        header_start = p
        header_count, p = _short_varint(buf, header_start, record_end)
        if p < 0:
            header_count, p = varint(buf, header_start, record_end)
            if p < 0:
                return 3, n
        if header_count < 0:
            return 7, n
        for _ in range(header_count):  # each header's key and value skipped, as Kafka's partial read does
            q = p
            header_key_len, p = _short_varint(buf, q, record_end)
            if p < 0:
                header_key_len, p = varint(buf, q, record_end)
                if p < 0:
                    return 3, n
            if header_key_len < 0:
                return 8, n
            q = p + header_key_len
            header_value_len, p = _short_varint(buf, q, record_end)
            if p < 0:
                header_value_len, p = varint(buf, q, record_end)
                if p < 0:
                    return 3, n
            if header_value_len < -1:
                return 3, n
            if header_value_len > 0:
                p += header_value_len
        if p != record_end:
            return 4, n
        out[TS_DELTA, n] = ts_delta
        out[OFFSET_DELTA, n] = offset_delta
        out[KEY_START, n] = key_start
        out[KEY_LEN, n] = key_len
        out[VALUE_START, n] = value_start
        out[VALUE_LEN, n] = value_len
        out[HEADER_START, n] = header_start
        out[RECORD_END, n] = record_end
        out[HEADER_COUNT, n] = header_count
        n += 1
        pos = record_end
    if pos != section_end:
        return 5, n
    return 0, n


@intrinsic  # type: ignore[untyped-decorator]
def copy_bytes(typingctx: Any, dst: Any, dst_pos: Any, src: Any, src_pos: Any, n: Any) -> Any:
    """memcpy(dst + dst_pos, src + src_pos, n) on two uint8 arrays (a compiled slice
    assignment costs about a microsecond per call; memcpy copies a 1 KiB value in tens of ns)."""
    sig = types.void(dst, dst_pos, src, src_pos, n)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        d, dp, s, sp, count = args
        dptr = context.make_array(signature.args[0])(context, builder, d).data
        sptr = context.make_array(signature.args[2])(context, builder, s).data
        cgutils.raw_memcpy(builder, builder.gep(dptr, [dp]), builder.gep(sptr, [sp]), count, 1)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def gather(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray, values: np.ndarray,
           offsets: np.ndarray, first: int, o: int) -> int:
    """Arrow binary layout, one source buffer at a time: for each record i, `values[o:]`
    takes buf[starts[i]:starts[i]+lengths[i]] and `offsets[first + i]` (int32) says where it
    begins; a length of -1 (null) takes no bytes. Returns where the next value begins (the
    caller writes it as the last offset)."""
    for i in range(len(starts)):
        offsets[first + i] = o
        length = lengths[i]
        if length > 0:
            # (numba passes `typingctx` itself)
            copy_bytes(values, o, buf, starts[i], length)  # type: ignore[call-arg]
            o += length
    return o


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def scan_headers(buf: np.ndarray, header_starts: np.ndarray, counts: np.ndarray, key_start: np.ndarray,
                 key_len: np.ndarray, value_start: np.ndarray, value_len: np.ndarray, first: int) -> None:
    """Where each header's key and value lie, for records whose header count (`counts[r]`,
    0 for none) starts at `header_starts[r]`, as `scan_section` found and checked them:
    header `first`, `first + 1`, ... in record order (a null value's length is -1)."""
    h = first
    end = len(buf)
    for r in range(len(header_starts)):
        if counts[r] == 0:
            continue
        _, p = varint(buf, header_starts[r], end)
        for _ in range(counts[r]):
            length, p = varint(buf, p, end)
            key_start[h] = p
            key_len[h] = length
            p += length
            length, p = varint(buf, p, end)
            value_start[h] = p
            value_len[h] = length
            if length > 0:
                p += length
            h += 1


# Columns of `walk_batches`'s output (v2 batch headers, Kafka `DefaultRecordBatch`), one int64 row each.
B_POS, B_SIZE, B_BASE_OFFSET, B_LAST_OFFSET_DELTA, B_ATTRIBUTES, B_BASE_TS, B_MAX_TS, B_PRODUCER_ID, B_COUNT = range(9)
BATCH_FIELDS: Final = 9
BATCH_OVERHEAD: Final = 61


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def read_be(buf: np.ndarray, pos: int, width: int) -> int:
    """A signed big-endian integer of `width` bytes at `pos`."""
    v = np.int64(0)
    for i in range(width):
        v = (v << 8) | np.int64(buf[pos + i])
    if width < 8 and v >= (np.int64(1) << (8 * width - 1)):
        v -= np.int64(1) << (8 * width)
    return v  # type: ignore[return-value]


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def write_be(buf: np.ndarray, pos: int, width: int, value: int) -> None:
    v = np.int64(value)
    for i in range(width - 1, -1, -1):
        buf[pos + i] = np.uint8(v & 0xFF)
        v >>= 8


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def walk_batches(buf: np.ndarray, pos: int, end: int, out: np.ndarray) -> tuple[int, int]:
    """The headers of the whole batches in buf[pos:end], into `out[B_FIELD, batch]`, until
    a batch that does not fit or `out` is full. Returns (batches read, position after the
    last). Sizes are not validated beyond fitting (the log validated them at append)."""
    n = 0
    while n < out.shape[1] and end - pos >= BATCH_OVERHEAD:
        size = read_be(buf, pos + 8, 4) + 12
        if size < BATCH_OVERHEAD or pos + size > end:
            break
        out[B_POS, n] = pos
        out[B_SIZE, n] = size
        out[B_BASE_OFFSET, n] = read_be(buf, pos, 8)
        out[B_LAST_OFFSET_DELTA, n] = read_be(buf, pos + 23, 4)
        out[B_ATTRIBUTES, n] = read_be(buf, pos + 21, 2)
        out[B_BASE_TS, n] = read_be(buf, pos + 27, 8)
        out[B_MAX_TS, n] = read_be(buf, pos + 35, 8)
        out[B_PRODUCER_ID, n] = read_be(buf, pos + 43, 8)
        out[B_COUNT, n] = read_be(buf, pos + 57, 4)
        n += 1
        pos += size
    return n, pos
