"""A log moved to another log dir (AlterReplicaLogDirs): the future log follows the current one
batch for batch, through new appends, a truncation of the current log, a log start moved by
DeleteRecords or retention and the gaps of a compacted log, then takes its place; a move a
restart interrupted goes on from its future log, and a crash between the two renames of the
replacement leaves one whole log at the next load."""

import uuid

from kmirror.config.definitions import LONG_MAX
from kmirror.log.config import LogConfig
from kmirror.log.future_logs import FLUSH_BYTES, CopyQuota, FutureLog, copy_step
from kmirror.log.log import Log
from kmirror.log.log_manager import LogManager
from kmirror.ports import ManualClock
from kmirror.records.batch import iter_batches
from kmirror.records.builder import build_batch
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.types import TopicPartition

NOW = 1_700_000_000_000
TP = TopicPartition("t", 0)


def _batch(n: int, tag: bytes = b"v") -> bytes:
    return build_batch([(None, tag + bytes([i]), (), NOW + i) for i in range(n)])


def _manager(fs: MemoryFileSystem) -> LogManager:
    m = LogManager(fs, ["/d1", "/d2"], ManualClock(NOW), LogConfig(segment_bytes=400))
    m.load_logs()
    return m


def _partition(fs: MemoryFileSystem) -> tuple[LogManager, Log, str, str]:
    """A manager of two log dirs holding TP's log: (manager, log, its dir, the other dir)."""
    m = _manager(fs)
    log = m.get_or_create_log(TP, uuid.UUID(int=1))
    source = m.log_dir_of(TP)
    assert source is not None
    return m, log, source, "/d2" if source == "/d1" else "/d1"


def _batches(log: Log) -> list[bytes]:
    """Every batch of the log, whatever its segments."""
    out: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        raw = bytes(log.read(offset, 1 << 20).records)
        for pos, header in iter_batches(raw):
            out.append(raw[pos:pos + header.size])
            offset = header.next_offset
    return out


def _copy_all(current: Log, future: Log) -> None:
    for _ in range(1000):
        if copy_step(current, future, step_bytes=150):
            return
    raise AssertionError("the future log never caught up")


def test_a_future_log_follows_appends_truncation_and_the_log_start_then_replaces_the_log() -> None:
    fs = MemoryFileSystem()
    m, current, source, destination = _partition(fs)
    for epoch in (0, 0, 1):
        current.append_as_leader(_batch(5), epoch)
    future = m.create_future_log(TP, destination, "f1")
    assert not copy_step(current, future, step_bytes=150)  # one step, not the whole log
    current.append_as_leader(_batch(5), 1)
    _copy_all(current, future)
    assert future.log_end_offset == current.log_end_offset == 20

    current.truncate_to(10)  # a new leader cut the current log; it goes on in epoch 2
    current.append_as_leader(_batch(4, b"w"), 2)
    current.update_high_watermark(14)
    current.maybe_increment_log_start_offset(3)  # DeleteRecords, in the middle of the first batch
    _copy_all(current, future)
    assert future.log_end_offset == 14

    expected = _batches(current)
    replaced = m.replace_with_future(future, destination)
    assert m.get_log(TP) is replaced and m.log_dir_of(TP) == destination and current.closed
    assert (replaced.log_start_offset, replaced.log_end_offset, replaced.high_watermark) == (3, 14, 14)
    assert _batches(replaced) == expected and replaced.epoch_cache.entries == current.epoch_cache.entries
    assert not any(name.startswith("t-0") for name in fs.listdir(source) if not name.endswith("-delete"))
    m.close()
    again = _manager(fs)
    assert again.log_dir_of(TP) == destination and _batches(again.get_log(TP)) == expected


def test_a_log_start_past_the_future_log_and_compacted_gaps() -> None:
    fs = MemoryFileSystem()
    m, current, _, destination = _partition(fs)
    current.append_as_follower(build_batch([(b"k", b"a", (), NOW)], base_offset=0))
    current.append_as_follower(build_batch([(b"k", b"b", (), NOW)], base_offset=7))  # a gap, as compacted
    future = m.create_future_log(TP, destination, "f1")
    _copy_all(current, future)
    assert future.log_end_offset == 8 and _batches(future) == _batches(current)  # the gap kept
    current.append_as_leader(_batch(6), 0)
    current.roll()
    current.append_as_leader(_batch(2), 0)
    current.update_high_watermark(16)
    current.maybe_increment_log_start_offset(13)  # retention passed the future log's end
    current.delete_old_segments()
    _copy_all(current, future)
    expected = _batches(current)
    replaced = m.replace_with_future(future, destination)
    assert (replaced.log_start_offset, replaced.log_end_offset) == (13, 16) and _batches(replaced) == expected


def test_a_move_a_restart_interrupted_goes_on_and_one_without_its_partition_is_removed() -> None:
    fs = MemoryFileSystem()
    m, current, source, destination = _partition(fs)
    for _ in range(4):
        current.append_as_leader(_batch(5), 0)
    future = m.create_future_log(TP, destination, "f1")
    copy_step(current, future, step_bytes=150)
    future.flush()
    copied = future.log_end_offset
    m.close()  # the future log is not closed: a crash as far as it is concerned

    again = _manager(fs)
    assert again.log_dir_of(TP) == source and again.get_log(TP).log_end_offset == 20
    log_dir, resumed = again.futures[TP]
    assert log_dir == destination and resumed.log_end_offset == copied > 0
    assert resumed.topic_id == uuid.UUID(int=1)
    current = again.get_log(TP)
    expected = _batches(current)
    _copy_all(current, resumed)
    assert _batches(again.replace_with_future(resumed, destination)) == expected

    again.close()
    orphan = f"{source}/t-5.f2-future"  # a future log whose partition is not here
    Log.open(fs, orphan, TopicPartition("t", 5), LogConfig(), ManualClock(NOW), uuid.UUID(int=1)).close()
    third = _manager(fs)
    assert third.futures == {} and not fs.exists(orphan)


def test_a_partition_in_two_log_dirs_keeps_the_longer_log() -> None:
    fs = MemoryFileSystem()
    m, current, source, destination = _partition(fs)
    current.append_as_leader(_batch(5), 0)
    m.close()
    other = Log.open(fs, f"{destination}/t-0", TP, LogConfig(), ManualClock(NOW), uuid.UUID(int=1))
    other.append_as_leader(_batch(3), 0)
    other.close()
    again = _manager(fs)
    assert again.log_dir_of(TP) == source and again.get_log(TP).log_end_offset == 5
    assert "t-0" not in fs.listdir(destination)


def test_the_copy_quota_paces_steps_to_its_rate_and_no_rate_never_pauses() -> None:
    quota = CopyQuota()
    mib = 1 << 20
    assert quota.pause_s(10.0, mib, mib) == 1.0  # a 1 MiB step at 1 MiB/s: wait out the second
    assert quota.pause_s(10.5, mib, mib) == 1.5  # the same window: 2 MiB copied half a second in
    assert quota.pause_s(12.0, mib, mib) == 1.0  # a new window
    assert CopyQuota().pause_s(10.0, 100 * mib, LONG_MAX) == 0.0


def test_a_future_log_is_flushed_each_flush_bytes_copied() -> None:
    fs = MemoryFileSystem()
    m, log, _, other = _partition(fs)
    log.append_as_leader(_batch(3), 0)
    move = FutureLog(other, m.create_future_log(TP, other, "f1"))
    copy_step(log, move.log)
    segment = move.log.active_segment.log_path
    move.copied(FLUSH_BYTES - 1)
    assert fs.unflushed_bytes(segment) > 0 and move.unflushed == FLUSH_BYTES - 1
    move.copied(1)
    assert fs.unflushed_bytes(segment) == 0 and move.unflushed == 0
