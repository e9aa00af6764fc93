"""The filter pass decides the batches the key-map pass noted from its notes (`record_memo`):
the cleaned log is byte for byte the one a round without notes writes."""

from __future__ import annotations

import numpy as np
import pytest

import kmirror.log.cleaner.cleaning as cleaning_module
from kmirror.log.cleaner.cleanable import log_to_clean
from kmirror.log.cleaner.cleaning import LogCleaning
from kmirror.log.cleaner.offset_map import OffsetMap, map_chunk
from kmirror.log.cleaner.record_filter import noted
from kmirror.log.cleaner.record_memo import BATCHES_USED, RecordMemo
from kmirror.log.config import LogConfig
from kmirror.log.log import Log
from kmirror.ports import ManualClock
from kmirror.records.batch import BatchHeader, iter_batches
from kmirror.records.builder import build_batch
from kmirror.records.compression import CompressionType
from kmirror.records.record import decode_records
from kmirror.records.record_scan import BATCH_FIELDS, FIELDS, walk_batches
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.types import TopicPartition

NOW = 1_700_000_000_000
CONFIG = LogConfig(cleanup_policy=("compact",), segment_bytes=2000, index_interval_bytes=64, delete_retention_ms=1000)


def build(fs: MemoryFileSystem, clock: ManualClock, compression: int) -> Log:
    log = Log.open(fs, "/data/t-0", TopicPartition("t", 0), CONFIG, clock)
    n = 0
    for round_ in range(30):
        batch: list[tuple[bytes | None, bytes | None, tuple[()], int]] = []
        for i in range(5):
            key = None if (round_ * 5 + i) % 23 == 0 else b"k%d" % ((round_ * 7 + i) % 9)
            value = None if (round_ + i) % 6 == 0 else b"v%d" % n
            batch.append((key, value, (), NOW + n))
            n += 1
        log.append_as_leader(build_batch(batch, compression=compression), leader_epoch=0, now_ms=NOW)
    log.roll()
    log.append_as_leader(build_batch([(b"tail", b"t", (), NOW)]), leader_epoch=0, now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)
    return log


def cleaned(memo_bytes: int | None, now: int, compression: int) -> tuple[list[bytes], LogCleaning]:
    fs, clock = MemoryFileSystem(), ManualClock(NOW)
    log = build(fs, clock, compression)
    out = []
    cleaning = None
    for at in (now, now + 5000):  # the second round drops the tombstones whose horizon passed
        target = log_to_clean(log, None, at)
        cleaning = LogCleaning(log, target.first_dirty_offset, target.first_uncleanable_offset, at,
                               OffsetMap(1 << 20), step_bytes=128, memo_bytes=memo_bytes)
        for _ in cleaning.run():
            pass
        out.append(b"".join(fs.read(s.log_path, 0, s.size) for s in log.segments))
    assert cleaning is not None
    return out, cleaning


@pytest.mark.parametrize("codec", ["none", "lz4"])  # the compiled chunk path; the per-batch path
def test_a_round_from_the_notes_writes_what_a_round_without_them_writes(codec: str) -> None:
    compression = CompressionType.from_name(codec)
    with_notes, cleaning = cleaned(None, NOW, compression)
    without, plain = cleaned(0, NOW, compression)
    assert int(cleaning.memo.used[BATCHES_USED]) > 0
    assert int(plain.memo.used[BATCHES_USED]) == 0
    assert with_notes == without
    assert with_notes[0] != with_notes[1]


def test_the_filter_decompresses_only_the_batches_that_lose_some_records(monkeypatch: pytest.MonkeyPatch) -> None:
    fs, clock = MemoryFileSystem(), ManualClock(NOW)
    log = Log.open(fs, "/data/t-0", TopicPartition("t", 0), CONFIG, clock)
    lz4 = CompressionType.from_name("lz4")
    batches = [[b"a", b"b"],  # overwritten whole: dropped
               [b"a", b"c"],  # loses "a": rebuilt
               [b"a", b"b"]]  # every key's latest: kept as it is
    for keys in batches:
        log.append_as_leader(build_batch([(k, b"v", (), NOW) for k in keys], compression=lz4), leader_epoch=0,
                             now_ms=NOW)
    log.roll()
    log.append_as_leader(build_batch([(b"tail", b"t", (), NOW)]), leader_epoch=0, now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)
    decompressed: list[int] = []
    real = cleaning_module._records_section

    def counted(chunk: bytes, pos: int, header: BatchHeader) -> tuple[np.ndarray, int, int]:
        decompressed.append(header.base_offset)
        return real(chunk, pos, header)

    monkeypatch.setattr(cleaning_module, "_records_section", counted)
    target = log_to_clean(log, None, NOW)
    for _ in LogCleaning(log, target.first_dirty_offset, target.first_uncleanable_offset, NOW,
                         OffsetMap(1 << 20)).run():
        pass
    assert decompressed == [0, 2, 4, 2]  # the key-map pass reads all three, the filter only the one rebuilt
    stored = b"".join(fs.read(s.log_path, 0, s.size) for s in log.segments)
    kept = [(r.offset, r.key) for pos, _ in iter_batches(stored) for r in decode_records(stored, pos)]
    assert kept == [(3, b"c"), (4, b"a"), (5, b"b"), (6, b"tail")]


def test_a_batch_that_changed_since_it_was_noted_is_walked_again() -> None:
    raw = build_batch([(b"a", b"1", (), NOW), (b"b", b"2", (), NOW)])
    buf = np.frombuffer(raw, dtype=np.uint8)
    headers = np.empty((BATCH_FIELDS, 2), dtype=np.int64)
    n, _ = walk_batches(buf, 0, len(raw), headers)
    offset_map, memo = OffsetMap(1 << 16), RecordMemo(1 << 16)
    offset_map.reserve(2)
    memo.reserve(1, 2)
    map_chunk(buf, headers, n, 0, 10, np.empty((FIELDS, 2), dtype=np.int64), offset_map.slots, offset_map.arena,
              offset_map.offsets, offset_map.meta, offset_map.undo, offset_map.codes, offset_map.hashes,
              np.array([-1]),
              memo.batches, memo.records, memo.used)
    assert int(memo.used[BATCHES_USED]) == 1
    assert noted(memo.batches, memo.used, memo.cursor, crc(raw), 0, len(raw), 2) == 0
    memo.cursor[0] = 0
    changed = build_batch([(b"a", b"1", (), NOW), (b"b", b"3", (), NOW)])  # same offsets, size and count
    assert len(changed) == len(raw)
    assert noted(memo.batches, memo.used, memo.cursor, crc(changed), 0, len(raw), 2) == -1


def crc(raw: bytes) -> int:
    return int.from_bytes(raw[17:21], "big", signed=True)
