"""The log cleaner core on an in-memory file system: what a round keeps, rewrites and swaps."""

from __future__ import annotations

import numpy as np
import pytest

from kmirror.log.append_analysis import AppendOrigin
from kmirror.log.cleaner.cleanable import log_to_clean
from kmirror.log.cleaner.cleaning import DedupeBufferTooSmall, LogCleaning
from kmirror.log.cleaner.offset_map import ENTRY_OVERHEAD_BYTES, OffsetMap
from kmirror.log.config import LogConfig
from kmirror.log.log import Log
from kmirror.log.producer_state import PRODUCER_ID_EXPIRATION_MS
from kmirror.log.segment import LogSegment
from kmirror.ports import ManualClock
from kmirror.records.batch import RECORD_BATCH_OVERHEAD, iter_batches, read_header
from kmirror.records.builder import build_batch
from kmirror.records.control import ControlType, build_control_batch
from kmirror.records.record import decode_records
from kmirror.records.record_scan import FIELDS, scan_section
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.types import TopicPartition

NOW = 1_700_000_000_000
DIR = "/data/t-0"
COMPACT = LogConfig(cleanup_policy=("compact",), segment_bytes=300, index_interval_bytes=64,
                    delete_retention_ms=1000)


def open_log(fs: MemoryFileSystem, clock: ManualClock, config: LogConfig = COMPACT) -> Log:
    return Log.open(fs, DIR, TopicPartition("t", 0), config, clock)


def produce(log: Log, key: bytes | None, value: bytes | None, ts: int = NOW, **producer: int) -> None:
    log.append_as_leader(build_batch([(key, value, (), ts)], **producer), leader_epoch=0, now_ms=ts)
    log.update_high_watermark(log.log_end_offset)


def clean(log: Log, now: int, checkpoint: int | None = None, memory: int = 1 << 20) -> LogCleaning:
    target = log_to_clean(log, checkpoint, now)
    cleaning = LogCleaning(log, target.first_dirty_offset, target.first_uncleanable_offset, now,
                           OffsetMap(memory), step_bytes=128)
    for _ in cleaning.run():
        pass
    return cleaning


def records(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    for segment in log.segments:
        data = log.fs.read(segment.log_path, 0, segment.size)
        for pos, header in iter_batches(data):
            if not header.is_control:
                out.extend((r.offset, r.key, r.value) for r in decode_records(data, pos))
    return out


def headers(log: Log) -> list:
    out = []
    for segment in log.segments:
        data = log.fs.read(segment.log_path, 0, segment.size)
        out.extend(h for _, h in iter_batches(data))
    return out


def test_latest_value_per_key_and_offsets_keep_their_gaps() -> None:
    fs, clock = MemoryFileSystem(), ManualClock(NOW)
    log = open_log(fs, clock)
    for i in range(30):
        produce(log, f"k{i % 3}".encode(), f"v{i}".encode())
    log.roll()
    produce(log, b"other", b"x")
    cleaning = clean(log, NOW)
    assert cleaning.end_offset == 30
    assert records(log) == [(27, b"k0", b"v27"), (28, b"k1", b"v28"), (29, b"k2", b"v29"), (30, b"other", b"x")]
    assert log.log_end_offset == 31
    reopened = open_log(fs, clock)
    assert records(reopened) == records(log)


def test_fully_kept_batches_are_copied_byte_for_byte() -> None:
    fs, clock = MemoryFileSystem(), ManualClock(NOW)
    log = open_log(fs, clock)
    produce(log, b"a", b"1")
    produce(log, b"b", b"2")
    produce(log, b"a", b"3")
    log.roll()
    produce(log, b"c", b"4")
    before = fs.read(log.segments[0].log_path, 0, log.segments[0].size)
    b_batch = before[log.segments[0].find_batch(1)[0]:][:read_header(before, log.segments[0].find_batch(1)[0]).size]
    clean(log, NOW)
    after = fs.read(log.segments[0].log_path, 0, log.segments[0].size)
    assert b_batch in after
    assert [r[0] for r in records(log)] == [1, 2, 3]


def test_rebuilt_batch_keeps_base_offset_producer_fields_and_codec() -> None:
    fs, clock = MemoryFileSystem(), ManualClock(NOW)
    log = open_log(fs, clock)
    batch = build_batch([(b"a", b"1", (), NOW), (b"b", b"2", (), NOW + 1), (b"c", b"3", (), NOW + 2)],
                        compression=4, producer_id=7, producer_epoch=2, base_sequence=0)
    log.append_as_leader(batch, leader_epoch=0, now_ms=NOW)
    produce(log, b"b", b"new", producer_id=7, producer_epoch=2, base_sequence=3)
    log.roll()
    produce(log, b"z", b"z")
    log.update_high_watermark(log.log_end_offset)
    clean(log, NOW)
    first = headers(log)[0]
    assert (first.base_offset, first.last_offset_delta, first.producer_id, first.producer_epoch,
            first.base_sequence, first.compression, first.records_count) == (0, 2, 7, 2, 0, 4, 2)
    assert records(log)[:3] == [(0, b"a", b"1"), (2, b"c", b"3"), (3, b"b", b"new")]


def test_tombstones_get_a_delete_horizon_then_go_after_delete_retention() -> None:
    fs, clock = MemoryFileSystem(), ManualClock(NOW)
    log = open_log(fs, clock)
    produce(log, b"a", b"1")
    produce(log, b"a", None)
    produce(log, b"b", b"2")
    log.roll()
    produce(log, b"c", b"3")
    cleaning = clean(log, NOW)
    assert records(log) == [(1, b"a", None), (2, b"b", b"2"), (3, b"c", b"3")]
    tombstone = headers(log)[0]
    assert tombstone.has_delete_horizon and tombstone.base_timestamp == NOW + 1000
    assert cleaning.latest_delete_horizon_ms == NOW + 1000
    clean(log, NOW + 999, checkpoint=cleaning.end_offset)
    assert records(log)[0] == (1, b"a", None)
    clean(log, NOW + 1000, checkpoint=cleaning.end_offset)
    assert records(log) == [(2, b"b", b"2"), (3, b"c", b"3")]


def test_last_batch_of_an_active_producer_stays_as_an_empty_batch() -> None:
    fs, clock = MemoryFileSystem(), ManualClock(NOW)
    log = open_log(fs, clock)
    produce(log, b"a", b"1", producer_id=5, producer_epoch=0, base_sequence=0)
    produce(log, b"b", b"x")
    produce(log, b"a", b"2")
    produce(log, b"b", b"y")
    log.roll()
    produce(log, b"c", b"3")
    clean(log, NOW)
    kept = headers(log)
    assert kept[0].producer_id == 5 and kept[0].records_count == 0 and kept[0].base_sequence == 0
    assert records(log)[0] == (2, b"a", b"2")
    reopened = open_log(fs, clock)
    assert reopened.producer_state.producers[5].last_seq == 0


def test_an_expired_producers_last_batch_is_cleaned_away() -> None:
    fs, clock = MemoryFileSystem(), ManualClock(NOW)
    log = open_log(fs, clock)
    produce(log, b"a", b"1", producer_id=5, producer_epoch=0, base_sequence=0)
    produce(log, b"a", b"2")
    log.roll()
    produce(log, b"c", b"3")
    later = NOW + PRODUCER_ID_EXPIRATION_MS
    assert log.remove_expired_producers(later) == 1  # producer.id.expiration.ms (KIP-854)
    clean(log, later)
    assert [h.producer_id for h in headers(log)] == [-1, -1]  # no empty batch kept for it
    assert records(log) == [(1, b"a", b"2"), (2, b"c", b"3")]


def test_aborted_transaction_data_goes_and_markers_go_after_the_horizon() -> None:
    fs, clock = MemoryFileSystem(), ManualClock(NOW)
    log = open_log(fs, clock)
    txn = {"producer_id": 9, "producer_epoch": 0, "is_transactional": True}
    log.append_as_leader(build_batch([(b"a", b"aborted", (), NOW)], base_sequence=0, **txn), 0, NOW)
    log.append_as_leader(build_control_batch(ControlType.ABORT, 9, 0, NOW), 0, NOW, origin=AppendOrigin.COORDINATOR)
    log.append_as_leader(build_batch([(b"a", b"committed", (), NOW)], base_sequence=1, **txn), 0, NOW)
    log.append_as_leader(build_control_batch(ControlType.COMMIT, 9, 0, NOW), 0, NOW, origin=AppendOrigin.COORDINATOR)
    produce(log, b"b", b"plain")
    log.roll()
    produce(log, b"z", b"z")
    assert [t.producer_id for t in log.collect_aborted_transactions(0, log.log_end_offset)] == [9]
    clean(log, NOW)
    assert [r for r in records(log) if r[1] == b"a"] == [(2, b"a", b"committed")]
    # the ABORT marker stays this round (it met its transaction's data) and stays indexed
    assert [(t.producer_id, t.last_offset) for t in log.collect_aborted_transactions(0, log.log_end_offset)] == [(9, 1)]
    reopened = open_log(fs, clock)
    assert [t.last_offset for t in reopened.collect_aborted_transactions(0, reopened.log_end_offset)] == [1]
    log = reopened
    log.update_high_watermark(log.log_end_offset)  # a node restores it from its checkpoint
    clean(log, NOW + 5000)
    clean(log, NOW + 10_000)
    kinds = [(h.base_offset, h.is_control, h.records_count) for h in headers(log)]
    assert (1, True, 1) not in kinds  # the ABORT marker of the emptied transaction is gone


def test_cleaning_twice_changes_nothing() -> None:
    fs, clock = MemoryFileSystem(), ManualClock(NOW)
    log = open_log(fs, clock)
    for i in range(20):
        produce(log, f"k{i % 4}".encode(), f"v{i}".encode())
    log.roll()
    produce(log, b"z", b"z")
    clean(log, NOW)
    kept = records(log)
    clean(log, NOW)  # drops the empty batches that kept each source segment's last offset
    assert records(log) == kept
    files = [fs.read(s.log_path, 0, s.size) for s in log.segments]
    for _ in range(5):  # segments shrink and merge into fewer groups until nothing changes
        clean(log, NOW)
        assert records(log) == kept
        now_files = [fs.read(s.log_path, 0, s.size) for s in log.segments]
        if now_files == files:
            break
        files = now_files
    else:
        raise AssertionError("cleaning never reached a fixed point")


def test_a_small_offset_map_cleans_in_several_rounds() -> None:
    fs, clock = MemoryFileSystem(), ManualClock(NOW)
    log = open_log(fs, clock)
    for i in range(40):
        produce(log, f"k{i % 8}".encode(), f"v{i}".encode())
    log.roll()
    produce(log, b"z", b"z")
    checkpoint = None
    for _ in range(20):
        cleaning = clean(log, NOW, checkpoint, memory=500)
        checkpoint = cleaning.end_offset
        if checkpoint >= 40:
            break
    assert sorted(r[1] for r in records(log)[:-1]) == sorted(f"k{i}".encode() for i in range(8))


def test_a_crash_after_the_swap_file_is_complete_recovers_the_cleaned_segment() -> None:
    fs, clock = MemoryFileSystem(), ManualClock(NOW)
    log = open_log(fs, clock)
    for i in range(12):
        produce(log, f"k{i % 2}".encode(), f"v{i}".encode())
    log.roll()
    produce(log, b"z", b"z")
    log.flush()
    old = [(s.base_offset, fs.read(s.log_path, 0, s.size)) for s in log.segments[:-1]]
    scratch = MemoryFileSystem()
    scratch.mkdirs(DIR)
    for base, data in old:  # clean a copy, then plant its output as an interrupted swap
        scratch.append(f"{DIR}/{base:020d}.log", data)
    copy = open_log(scratch, clock)
    produce(copy, b"z", b"z")
    clean(copy, NOW)
    cleaned = scratch.read(copy.segments[0].log_path, 0, copy.segments[0].size)
    swap_end = copy.segments[1].base_offset
    cleaned_records = [r for r in records(copy) if r[0] < swap_end]
    original = records(log)
    fs.append(f"{DIR}/{0:020d}.log.swap", cleaned)
    fs.fsync(f"{DIR}/{0:020d}.log.swap")
    fs.crash()
    recovered = open_log(fs, clock)
    assert records(recovered) == cleaned_records + [r for r in original if r[0] >= swap_end]
    assert len(cleaned_records) < len([r for r in original if r[0] < swap_end])
    assert recovered.log_end_offset == log.log_end_offset
    assert not any(name.endswith(".swap") for name in fs.listdir(DIR))


def test_a_crash_while_writing_the_cleaned_segment_keeps_the_old_segments() -> None:
    fs, clock = MemoryFileSystem(), ManualClock(NOW)
    log = open_log(fs, clock)
    for i in range(12):
        produce(log, f"k{i % 2}".encode(), f"v{i}".encode())
    log.roll()
    produce(log, b"z", b"z")
    log.flush()
    before = records(log)
    target = log_to_clean(log, None, NOW)
    cleaning = LogCleaning(log, target.first_dirty_offset, target.first_uncleanable_offset, NOW, OffsetMap(1 << 20),
                           step_bytes=64)
    steps = cleaning.run()
    while not any(name.endswith(".cleaned") for name in fs.listdir(DIR)):
        next(steps)
    assert any(name.endswith(".cleaned") for name in fs.listdir(DIR))
    fs.crash()
    recovered = open_log(fs, clock)
    assert records(recovered) == before
    assert not any(name.endswith((".cleaned", ".swap")) for name in fs.listdir(DIR))


def test_a_round_overtaken_by_retention_is_abandoned() -> None:
    fs, clock = MemoryFileSystem(), ManualClock(NOW)
    log = open_log(fs, clock, LogConfig(cleanup_policy=("compact", "delete"), segment_bytes=300,
                                        retention_bytes=400))
    for i in range(20):
        produce(log, f"k{i % 2}".encode(), f"v{i}".encode())
    log.roll()
    produce(log, b"z", b"z")
    target = log_to_clean(log, None, NOW)
    cleaning = LogCleaning(log, target.first_dirty_offset, target.first_uncleanable_offset, NOW, OffsetMap(1 << 20),
                           step_bytes=64)
    steps = cleaning.run()
    next(steps)
    log.delete_old_segments(NOW)
    start = log.log_start_offset
    try:
        for _ in steps:
            pass
    except Exception as error:
        assert type(error).__name__ == "CleaningAborted"
    assert all(r[0] >= start for r in records(log))
    assert not any(name.endswith((".cleaned", ".swap")) for name in fs.listdir(DIR))


def test_segment_files_are_renamed_with_their_suffix() -> None:
    fs = MemoryFileSystem()
    fs.mkdirs(DIR)
    segment = LogSegment(fs, DIR, 5, index_interval_bytes=1, max_index_size=1024, created_ms=0, file_suffix=".cleaned")
    segment.create()
    segment.append(build_batch([(b"a", b"1", (), NOW)], base_offset=5))
    segment.change_file_suffix(".swap")
    assert fs.exists(f"{DIR}/{5:020d}.log.swap") and fs.exists(f"{DIR}/{5:020d}.index.swap")
    segment.change_file_suffix("")
    assert fs.exists(f"{DIR}/{5:020d}.log") and not fs.exists(f"{DIR}/{5:020d}.log.swap")


def test_a_key_map_too_small_for_one_batch_fails_the_round_and_keeps_the_log() -> None:
    fs, clock = MemoryFileSystem(), ManualClock(NOW)
    log = open_log(fs, clock)
    log.append_as_leader(build_batch([(b"key-%d" % i, b"v", (), NOW) for i in range(4)]), 0, now_ms=NOW)
    log.roll()
    produce(log, b"z", b"z")
    before = records(log)
    with pytest.raises(DedupeBufferTooSmall, match="log.cleaner.dedupe.buffer.size"):
        clean(log, NOW, memory=200)
    assert records(log) == before


def put(m: OffsetMap, base_offset: int, keys: list[bytes | None], start_offset: int) -> bool:
    raw = build_batch([(k, b"v", (), NOW) for k in keys], base_offset=base_offset)
    buf = np.frombuffer(raw, dtype=np.uint8)
    fields = np.empty((FIELDS, len(keys)), dtype=np.int64)
    assert scan_section(buf, RECORD_BATCH_OVERHEAD, len(raw), len(keys), fields, 0)[0] == 0
    return m.put_records(buf, fields, 0, len(keys), base_offset, start_offset)


def test_offset_map_puts_a_batch_whole_or_not_at_all():
    m = OffsetMap(2 * (ENTRY_OVERHEAD_BYTES + 1), load_factor=1.0)  # room for two one-byte keys
    assert put(m, 10, [b"a", None, b"a", b"b"], start_offset=11)
    assert (m.get(b"a"), m.get(b"b"), len(m), m.used_bytes) == (12, 13, 2, m.capacity_bytes)  # 10 below the start
    assert put(m, 20, [b"b"], start_offset=0) and m.get(b"b") == 20  # an overwrite needs no room
    assert not put(m, 30, [b"a", b"c"], start_offset=0)  # c does not fit: a is not moved either
    assert (m.get(b"a"), m.get(b"c"), len(m)) == (12, -1, 2)


def test_offset_map_keeps_exact_keys_through_growth_and_undo():
    m = OffsetMap(1 << 22, load_factor=1.0)
    keys = [b"k%d" % i for i in range(5000)] + [b""]
    for i in range(0, len(keys), 100):
        assert put(m, i, keys[i:i + 100], start_offset=0)
    assert all(m.get(k) == i for i, k in enumerate(keys)) and m.get(b"k5000") == -1
    small = OffsetMap(3 * (ENTRY_OVERHEAD_BYTES + 2), load_factor=1.0)
    assert put(small, 0, [b"aa", b"bb"], start_offset=0)
    assert not put(small, 2, [b"bb", b"cc", b"dd", b"aa"], start_offset=0)  # two new keys, room for one
    assert (small.get(b"aa"), small.get(b"bb"), small.get(b"cc"), small.get(b"dd"), len(small)) == (0, 1, -1, -1, 2)
    assert put(small, 6, [b"cc", b"aa"], start_offset=0) and (small.get(b"cc"), small.get(b"aa")) == (6, 7)


def test_deferred_deletes_leave_the_replaced_segments_as_deleted_files_until_deleted() -> None:
    fs, clock = MemoryFileSystem(), ManualClock(NOW)
    log = open_log(fs, clock)
    for i in range(12):
        produce(log, f"k{i % 2}".encode(), f"v{i}".encode())
    log.roll()
    produce(log, b"z", b"z")
    target = log_to_clean(log, None, NOW)
    cleaning = LogCleaning(log, target.first_dirty_offset, target.first_uncleanable_offset, NOW, OffsetMap(1 << 20),
                           defer_deletes=True)
    for _ in cleaning.run():
        pass
    kept = records(log)
    deleted = sorted(name for name in fs.listdir(DIR) if name.endswith(".deleted"))
    assert cleaning.replaced and len(deleted) >= len(cleaning.replaced)
    assert all(s.log_path.endswith(".log.deleted") for s in cleaning.replaced)
    assert records(open_log(fs, clock)) == kept  # a load drops what a crash left behind
    assert not any(name.endswith(".deleted") for name in fs.listdir(DIR))
