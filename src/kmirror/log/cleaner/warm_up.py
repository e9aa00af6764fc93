"""Loading the cleaner's compiled functions before a round needs them.

numba compiles each function at its first call (seconds) or loads it from the on-disk cache
(about a second for the cleaner's set): either would stall the first cleaning round, which
runs between an event loop's turns. `warm_up` calls every one of them once, with the
argument types a round uses (read-only views of bytes read from a file, writable scratch
arrays), on a few records built here; a node runs it once off the event loop at start.
"""

from __future__ import annotations

import numpy as np

from kmirror.log.cleaner.offset_map import OffsetMap, map_chunk, put_batch
from kmirror.log.cleaner.record_filter import (
    STATS,
    decide,
    decide_noted,
    filter_chunk,
    noted,
    noted_fields,
    write_kept,
)
from kmirror.log.cleaner.record_memo import RecordMemo
from kmirror.log.cleaner.segment_reader import summarize
from kmirror.records.builder import build_batch
from kmirror.records.record_scan import BATCH_FIELDS, BATCH_OVERHEAD, FIELDS, scan_section, walk_batches


def warm_up() -> None:
    raw = build_batch([(b"k", b"v", (), 0), (b"k", None, (), 0), (None, b"v", (), 0)])
    buf = np.frombuffer(raw, dtype=np.uint8)  # read-only, as a chunk read from a segment
    headers = np.empty((BATCH_FIELDS, 4), dtype=np.int64)
    n, _ = walk_batches(buf, 0, len(raw), headers)
    summarize(headers, n)
    fields = np.empty((FIELDS, 4), dtype=np.int64)
    keep = np.empty(4, dtype=np.bool_)
    offset_map = OffsetMap(1 << 16)
    offset_map.reserve(3000)  # and the table's growth
    latest = np.array([-1], dtype=np.int64)
    memo = RecordMemo(1 << 16)
    memo.reserve(n, 3)
    map_chunk(buf, headers, n, 0, 10, fields, offset_map.slots, offset_map.arena, offset_map.offsets, offset_map.meta,
              offset_map.undo, offset_map.codes, offset_map.hashes, latest, memo.batches, memo.records, memo.used)
    offset_map.latest_offset = int(latest[0])
    scan_section(buf, BATCH_OVERHEAD, len(raw), 3, fields, 0)
    offset_map.put_records(buf, fields, 0, 3, 0, 0)
    offset_map.get(b"k")
    memo.clear()  # the per-batch paths (compressed, transactional)
    put_batch(offset_map.slots, offset_map.arena, offset_map.offsets, offset_map.meta, offset_map.undo, offset_map.codes,
              offset_map.hashes, buf, fields, 3, 0, 0, BATCH_OVERHEAD, len(raw), 0, memo.batches, memo.records, memo.used)
    first = noted(memo.batches, memo.used, memo.cursor, 0, 0, len(raw), 3)
    decide_noted(3, 0, memo.records, max(first, 0), offset_map.offsets, True, keep)
    noted_fields(buf, BATCH_OVERHEAD, 3, memo.records, max(first, 0), keep, fields)
    memo.clear()
    out = np.empty(2 * len(raw) + 64, dtype=np.uint8)
    crc_positions = np.empty(4, dtype=np.int64)
    pids = np.array([7], dtype=np.int64)
    written = np.empty((4, 4), dtype=np.int64)
    filter_chunk(buf, headers, n, 3, 0, offset_map.latest_offset, 100, offset_map.slots, offset_map.arena,
                 offset_map.offsets, pids, pids, fields, keep, out, crc_positions, written, np.zeros(STATS, dtype=np.int64),
                 memo.batches, memo.records, memo.used, memo.cursor)
    decide(buf, fields, 0, 3, 0, offset_map.latest_offset, True, False, offset_map.slots, offset_map.arena,
           offset_map.offsets, keep)
    write_kept(buf, fields, 0, 3, BATCH_OVERHEAD, keep, True, 100, 0, 0, False, out, 0)
    decompressed = np.frombuffer(bytes(raw[BATCH_OVERHEAD:]), dtype=np.uint8)  # a decompressed section
    scan_section(decompressed, 0, len(decompressed), 3, fields, 0)
    offset_map.put_records(decompressed, fields, 0, 3, 0, 0)
    decide(decompressed, fields, 0, 3, 0, 2, True, False, offset_map.slots, offset_map.arena, offset_map.offsets, keep)
    write_kept(decompressed, fields, 0, 3, 0, keep, False, 0, 0, 0, False, out, 0)
