"""The cleaner's per-record work, compiled (numba): which records of a batch stay (Kafka
`Cleaner.shouldRetainRecord`) and the kept records' bytes (Kafka `MemoryRecords.filterTo`).

- `decide`: past the map's coverage, keep; a record without a key is invalid in a
  compacted log and goes; otherwise keep the key's latest offset, a tombstone only while
  its batch's delete horizon has not passed. Control batches keep every record.
- `write_kept`: the kept records back to back, byte for byte (their offset and timestamp
  deltas stay valid: the base offset and base timestamp are kept), or, when a delete
  horizon is set (KIP-534), each record's timestamp delta re-encoded against it.
- `filter_chunk`: a whole I/O chunk of plain batches (no control, no transactional flag,
  uncompressed) in one call: each batch copied unchanged when it keeps every record and
  needs no horizon, rebuilt when it loses some (the header's length, count, timestamps and
  attributes patched; the CRC is left to the caller, `crc_positions`), written as an empty
  header (Kafka `writeEmptyHeader`) when it keeps none but must stay, or dropped.
Records are located by `kmirror.records.record_scan.scan_section`.
"""

from __future__ import annotations

import numpy as np
from numba import njit  # type: ignore[import-untyped]

from kmirror.log.cleaner.offset_map import lookup
from kmirror.log.cleaner.record_memo import (
    BATCHES_USED,
    M_BASE_OFFSET,
    M_CODE,
    M_CRC,
    M_DELTA,
    M_END,
    M_FIRST,
    M_SIZE,
    RECORDS_USED,
)
from kmirror.records.record_scan import (
    B_ATTRIBUTES,
    B_BASE_OFFSET,
    B_BASE_TS,
    B_COUNT,
    B_LAST_OFFSET_DELTA,
    B_MAX_TS,
    B_POS,
    B_PRODUCER_ID,
    B_SIZE,
    BATCH_OVERHEAD,
    KEY_LEN,
    KEY_START,
    OFFSET_DELTA,
    RECORD_END,
    TS_DELTA,
    VALUE_LEN,
    copy_bytes,
    read_be,
    scan_section,
    varint,
    write_be,
)

TIMESTAMP_TYPE_MASK = 0x08
CONTROL_OR_TRANSACTIONAL = 0x30
DELETE_HORIZON_FLAG = 0x40
EMPTY_HEADER_KEEPS = 0x38  # timestamp type, transactional and control flags

# filter_chunk's counters
READ, WRITTEN, INVALID, HORIZON_SET, ERROR = range(5)
STATS = 5
# filter_chunk's batches written (`LogSegment.append`'s `located` rows)
W_BASE_OFFSET, W_LAST_OFFSET, W_MAX_TS, W_SIZE = range(4)


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def decide(buf: np.ndarray, fields: np.ndarray, first: int, count: int, base_offset: int, latest_offset: int,
           keep_deletes: bool, is_control: bool, slots: np.ndarray, arena: np.ndarray, offsets: np.ndarray,
           keep: np.ndarray) -> tuple[int, int, int]:
    """Fill keep[first:first+count]; returns (kept, invalid, tombstones kept)."""
    kept = invalid = tombstones = 0
    for r in range(first, first + count):
        offset = base_offset + fields[OFFSET_DELTA, r]
        key_len = fields[KEY_LEN, r]
        k = True
        if not is_control and offset <= latest_offset:
            if key_len < 0:
                invalid += 1
                k = False
            else:
                k = (offset >= lookup(slots, arena, offsets, buf, fields[KEY_START, r], key_len)
                     and (fields[VALUE_LEN, r] >= 0 or keep_deletes))
        keep[r] = k
        if k:
            kept += 1
            if not is_control and fields[VALUE_LEN, r] < 0:
                tombstones += 1
    return kept, invalid, tombstones


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def _put_varint(out: np.ndarray, pos: int, value: int) -> int:
    v = (np.uint64(value) << np.uint64(1)) ^ np.uint64(value >> 63)
    while v >= np.uint64(0x80):
        out[pos] = np.uint8((v & np.uint64(0x7F)) | np.uint64(0x80))
        v >>= np.uint64(7)
        pos += 1
    out[pos] = np.uint8(v)
    return pos + 1


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def _varint_size(value: int) -> int:
    v = (np.uint64(value) << np.uint64(1)) ^ np.uint64(value >> 63)
    n = 1
    while v >= np.uint64(0x80):
        v >>= np.uint64(7)
        n += 1
    return n


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def write_kept(buf: np.ndarray, fields: np.ndarray, first: int, count: int, section_start: int, keep: np.ndarray,
               rebase: bool, horizon_ms: int, base_ts: int, max_ts: int, log_append_time: bool,
               out: np.ndarray, out_pos: int) -> tuple[int, int]:
    """The kept records of fields[:, first:first+count] written at out[out_pos:]; returns
    (position after them, largest kept timestamp delta against the original base)."""
    max_delta = np.int64(-(2**62))
    start = section_start
    for r in range(first, first + count):
        end = fields[RECORD_END, r]
        if keep[r]:
            ts_delta = fields[TS_DELTA, r]
            if ts_delta > max_delta:
                max_delta = ts_delta
            if not rebase:
                copy_bytes(out, out_pos, buf, start, end - start)  # type: ignore[call-arg]
                out_pos += end - start
            else:
                _, body = varint(buf, start, end)  # the length; the attributes byte follows
                _, rest = varint(buf, body + 1, end)  # after the old timestamp delta
                new_delta = (max_ts if log_append_time else base_ts + ts_delta) - horizon_ms
                out_pos = _put_varint(out, out_pos, 1 + _varint_size(new_delta) + end - rest)
                out[out_pos] = buf[body]
                out_pos = _put_varint(out, out_pos + 1, new_delta)
                copy_bytes(out, out_pos, buf, rest, end - rest)  # type: ignore[call-arg]
                out_pos += end - rest
        start = end
    return out_pos, max_delta  # type: ignore[return-value]


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def _last_data_offset(pids: np.ndarray, last: np.ndarray, producer_id: int) -> int:
    i = np.searchsorted(pids, producer_id)
    return last[i] if i < len(pids) and pids[i] == producer_id else -2


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def filter_chunk(buf: np.ndarray, headers: np.ndarray, n_batches: int, upper_bound: int, now_ms: int,
                 latest_offset: int, horizon_ms: int, slots: np.ndarray, arena: np.ndarray, offsets: np.ndarray,
                 pids: np.ndarray, pid_last: np.ndarray, fields: np.ndarray, keep: np.ndarray, out: np.ndarray,
                 crc_positions: np.ndarray, written: np.ndarray, stats: np.ndarray, memo_batches: np.ndarray,
                 memo_records: np.ndarray, memo_used: np.ndarray, memo_cursor: np.ndarray) -> tuple[int, int, int]:
    """Clean `n_batches` plain batches (see the module doc) into `out`; returns (bytes
    written, batches whose CRC the caller must compute: their positions in `crc_positions`,
    batches written: `written[W_FIELD, i]` locates each for the segment's indexes).
    `pids`/`pid_last`: the active producers' ids, sorted, and their last data offsets. A batch
    the key-map pass noted (`record_memo`; `memo_cursor[0]` is the next noted batch to look
    for) is decided from its notes, others are walked. On a malformed batch, stats[ERROR]
    holds `scan_section`'s error code."""
    o = 0
    n_crc = 0
    n_out = 0
    for b in range(n_batches):
        pos = headers[B_POS, b]
        size = headers[B_SIZE, b]
        count = headers[B_COUNT, b]
        base = headers[B_BASE_OFFSET, b]
        attributes = headers[B_ATTRIBUTES, b]
        base_ts = headers[B_BASE_TS, b]
        max_ts = headers[B_MAX_TS, b]
        last_offset = base + headers[B_LAST_OFFSET_DELTA, b]
        stats[READ] += count
        has_horizon = (attributes & DELETE_HORIZON_FLAG) != 0
        keep_deletes = not has_horizon or now_ms < base_ts
        first = noted(memo_batches, memo_used, memo_cursor, read_be(buf, pos + 17, 4), base, size, count)
        from_notes = first >= 0 and last_offset <= latest_offset
        if from_notes:
            kept, invalid, tombstones = decide_noted(count, base, memo_records, first, offsets, keep_deletes, keep)
        else:
            error, _ = scan_section(buf, pos + BATCH_OVERHEAD, pos + size, count, fields, 0)
            if error != 0:
                stats[ERROR] = error
                return o, n_crc, n_out
            kept, invalid, tombstones = decide(buf, fields, 0, count, base, latest_offset, keep_deletes, False,
                                               slots, arena, offsets, keep)
        stats[INVALID] += invalid
        stats[WRITTEN] += kept
        if kept == 0:
            producer_id = headers[B_PRODUCER_ID, b]
            last_of_producer = producer_id >= 0 and _last_data_offset(pids, pid_last, producer_id) == last_offset
            if last_of_producer or last_offset + 1 == upper_bound:
                copy_bytes(out, o, buf, pos, BATCH_OVERHEAD)  # type: ignore[call-arg]
                write_be(out, o + 8, 4, BATCH_OVERHEAD - 12)
                write_be(out, o + 21, 2, attributes & EMPTY_HEADER_KEEPS)
                write_be(out, o + 27, 8, max_ts)
                write_be(out, o + 57, 4, 0)
                crc_positions[n_crc] = o
                n_crc += 1
                n_out = _written(written, n_out, base, last_offset, max_ts, BATCH_OVERHEAD)
                o += BATCH_OVERHEAD
            continue
        rebase = tombstones > 0 and not has_horizon
        if kept == count and not rebase:
            copy_bytes(out, o, buf, pos, size)  # type: ignore[call-arg]
            n_out = _written(written, n_out, base, last_offset, max_ts, size)
            o += size
            continue
        if from_notes:
            noted_fields(buf, pos + BATCH_OVERHEAD, count, memo_records, first, keep, fields)
        log_append_time = (attributes & TIMESTAMP_TYPE_MASK) != 0
        end, max_delta = write_kept(buf, fields, 0, count, pos + BATCH_OVERHEAD, keep, rebase, horizon_ms,
                                    base_ts, max_ts, log_append_time, out, o + BATCH_OVERHEAD)
        copy_bytes(out, o, buf, pos, BATCH_OVERHEAD)  # type: ignore[call-arg]
        write_be(out, o + 8, 4, end - o - 12)
        if rebase:
            stats[HORIZON_SET] = 1
            write_be(out, o + 21, 2, attributes | DELETE_HORIZON_FLAG)
            write_be(out, o + 27, 8, horizon_ms)
        if not log_append_time:
            max_ts = base_ts + max_delta
            write_be(out, o + 35, 8, max_ts)
        write_be(out, o + 57, 4, kept)
        crc_positions[n_crc] = o
        n_crc += 1
        n_out = _written(written, n_out, base, last_offset, max_ts, end - o)
        o = end
    return o, n_crc, n_out


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def _written(written: np.ndarray, n: int, base_offset: int, last_offset: int, max_ts: int, size: int) -> int:
    written[W_BASE_OFFSET, n] = base_offset
    written[W_LAST_OFFSET, n] = last_offset
    written[W_MAX_TS, n] = max_ts
    written[W_SIZE, n] = size
    return n + 1


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def noted(memo_batches: np.ndarray, memo_used: np.ndarray, memo_cursor: np.ndarray, crc: int, base: int, size: int,
          count: int) -> int:
    """The index of the batch's first noted record, -1 when the key-map pass did not note
    this batch as it is now (same base offset, size, CRC and record count)."""
    c = memo_cursor[0]
    used = memo_used[BATCHES_USED]
    while c < used and memo_batches[M_BASE_OFFSET, c] < base:
        c += 1
    memo_cursor[0] = c
    if c == used or memo_batches[M_BASE_OFFSET, c] != base or memo_batches[M_SIZE, c] != size:
        return -1
    first = memo_batches[M_FIRST, c]
    after = memo_batches[M_FIRST, c + 1] if c + 1 < used else memo_used[RECORDS_USED]
    if after - first != count or memo_batches[M_CRC, c] != crc:
        return -1
    memo_cursor[0] = c + 1
    return first  # type: ignore[no-any-return]


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def decide_noted(count: int, base_offset: int, memo_records: np.ndarray, first: int, offsets: np.ndarray,
                 keep_deletes: bool, keep: np.ndarray) -> tuple[int, int, int]:
    """`decide` for a noted data batch, every record within the map's coverage, from its
    notes alone (no byte of the batch is read: a compressed batch that keeps all or none of
    its records is never decompressed): fills keep[:count]; returns (kept, invalid,
    tombstones kept)."""
    kept = invalid = tombstones = 0
    for r in range(count):
        code = int(memo_records[M_CODE, first + r])
        if code < 0:
            invalid += 1
            keep[r] = False
        else:
            tombstone = (code & 1) == 1
            k = (base_offset + int(memo_records[M_DELTA, first + r]) >= offsets[code >> 1]
                 and (keep_deletes or not tombstone))
            keep[r] = k
            if k:
                kept += 1
                if tombstone:
                    tombstones += 1
    return kept, invalid, tombstones


@njit(cache=True, nogil=True)  # type: ignore[untyped-decorator]
def noted_fields(buf: np.ndarray, section_start: int, count: int, memo_records: np.ndarray, first: int,
                 keep: np.ndarray, fields: np.ndarray) -> None:
    """What `write_kept` needs of a noted batch being rebuilt, its records section at
    buf[section_start] (in the segment's bytes, or decompressed): fields[RECORD_END, r] of
    every record and fields[TS_DELTA, r] of the kept."""
    start = section_start
    for r in range(count):
        end = section_start + int(memo_records[M_END, first + r])
        fields[RECORD_END, r] = end
        if keep[r]:
            _, p = varint(buf, start, end)  # the length; the attributes byte follows
            ts_delta, _ = varint(buf, p + 1, end)
            fields[TS_DELTA, r] = ts_delta
        start = end
