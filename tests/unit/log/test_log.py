import uuid

from kmirror.log.append_analysis import AppendOrigin
from kmirror.log.config import LogConfig
from kmirror.log.log import Log
from kmirror.log.outcomes import (
    AppendError,
    FetchDataInfo,
    LogAppendInfo,
    OffsetOutOfRange,
    TimestampAndOffset,
)
from kmirror.ports import ManualClock
from kmirror.protocol.errors import ErrorCode
from kmirror.records.batch import iter_batches, read_header
from kmirror.records.builder import build_batch
from kmirror.records.control import ControlType, build_control_batch
from kmirror.records.record import iter_records
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.types import TopicPartition

TP = TopicPartition("t", 0)
NOW = 1_700_000_000_000


def _batch(n=1, ts=NOW, value=b"x" * 40, **kw):
    return build_batch([(None, value, (), ts + i) for i in range(n)], **kw)


def _open(fs=None, config=None, clock=None, **kw):
    fs = fs or MemoryFileSystem()
    return Log.open(fs, "/data/t-0", TP, config or LogConfig(), clock or ManualClock(NOW), **kw)


def _offsets(records):
    return [r.offset for r in iter_records(records)]


def test_leader_append_assigns_offsets_and_epochs():
    log = _open()
    info = log.append_as_leader(_batch(3), leader_epoch=5)
    assert isinstance(info, LogAppendInfo)
    assert (info.first_offset, info.last_offset, info.duplicate) == (0, 2, False)
    info = log.append_as_leader(_batch(2), leader_epoch=5)
    assert (info.first_offset, info.last_offset) == (3, 4)
    assert log.log_end_offset == 5 and log.high_watermark == 0
    assert log.epoch_cache.entries[0].epoch == 5
    log.update_high_watermark(5)
    read = log.read(0, 10**6, max_offset=log.high_watermark)
    assert isinstance(read, FetchDataInfo) and _offsets(read.records) == [0, 1, 2, 3, 4]
    assert [h.partition_leader_epoch for _, h in iter_batches(read.records)] == [5, 5]


def test_read_bounds_and_out_of_range():
    log = _open()
    for _ in range(3):
        log.append_as_leader(_batch(2), 0)
    log.update_high_watermark(4)
    assert _offsets(log.read(1, 10**6, max_offset=4).records) == [0, 1, 2, 3]
    assert log.read(4, 10**6, max_offset=4).records == b""
    assert log.read(6, 10**6).records == b""
    assert isinstance(log.read(7, 100), OffsetOutOfRange)
    assert log.read(7, 100).error_code == ErrorCode.offset_out_of_range


def test_invalid_records_are_rejected_as_values():
    log = _open()
    bad = bytearray(_batch(1))
    bad[-1] ^= 1
    result = log.append_as_leader(bytes(bad), 0)
    assert isinstance(result, AppendError) and result.error_code == ErrorCode.corrupt_message
    big = _open(config=LogConfig(max_message_bytes=100)).append_as_leader(_batch(1, value=b"y" * 200), 0)
    assert isinstance(big, AppendError) and big.error_code == ErrorCode.message_too_large
    assert log.log_end_offset == 0


def test_roll_by_size_and_reads_across_segments():
    log = _open(config=LogConfig(segment_bytes=300))
    for _ in range(10):
        log.append_as_leader(_batch(1), 0)
    assert len(log.segments) > 2
    log.update_high_watermark(10)
    assert _offsets(log.read(0, 10**6).records)[0] == 0
    collected = []
    offset = 0
    while offset < 10:
        records = log.read(offset, 10**6, max_offset=10).records
        got = _offsets(records)
        collected += got
        offset = got[-1] + 1
    assert collected == list(range(10))


def test_roll_by_segment_ms():
    clock = ManualClock(NOW)
    log = _open(config=LogConfig(segment_ms=1000), clock=clock)
    log.append_as_leader(_batch(1, ts=NOW), 0)
    log.append_as_leader(_batch(1, ts=NOW + 500), 0)
    assert len(log.segments) == 1
    log.append_as_leader(_batch(1, ts=NOW + 1000), 0)
    assert [s.base_offset for s in log.segments] == [0, 2]


def test_reopen_after_clean_close_and_after_kill():
    fs = MemoryFileSystem()
    log = _open(fs, config=LogConfig(segment_bytes=400), topic_id=uuid.UUID(int=7))
    for _ in range(8):
        log.append_as_leader(_batch(1), 3)
    log.close()
    again = _open(fs, config=LogConfig(segment_bytes=400), recovery_point=8)
    assert again.log_end_offset == 8 and again.topic_id == uuid.UUID(int=7)
    assert again.latest_epoch == 3
    again.append_as_leader(_batch(1), 4)
    # a killed process: nothing flushed since, but the page cache keeps it (no fs.crash())
    third = _open(fs, config=LogConfig(segment_bytes=400), recovery_point=8)
    assert third.log_end_offset == 9
    assert third.end_offset_for_epoch(3) == (3, 8)


def test_crash_truncates_torn_tail():
    fs = MemoryFileSystem()
    log = _open(fs)
    log.append_as_leader(_batch(1), 0)
    log.flush()
    log.append_as_leader(_batch(1), 0)
    fs.crash(lambda path, n: n // 2 if path.endswith(".log") else n)
    again = _open(fs)
    assert again.log_end_offset == 1
    assert _offsets(again.read(0, 10**6).records) == [0]


def test_follower_append_keeps_offsets_epochs_and_bytes():
    log = _open()
    batch = _batch(2, base_offset=10, partition_leader_epoch=7)
    info = log.append_as_follower(batch)
    assert isinstance(info, LogAppendInfo) and (info.first_offset, info.last_offset) == (10, 11)
    assert log.log_end_offset == 12
    assert log.read(10, 10**6).records == batch
    assert log.end_offset_for_epoch(7) == (7, 12)
    low = log.append_as_follower(_batch(1, base_offset=11))
    assert isinstance(low, AppendError)


def test_follower_append_keeps_whole_batches_of_a_fetch_cut_mid_batch():
    # A Fetch response may end in a partial batch cut at max_bytes (Kafka does the same); a
    # follower or mirror appends the whole batches before it and fetches the rest again.
    log = _open()
    first, second = _batch(2, base_offset=0, partition_leader_epoch=3), _batch(2, base_offset=2, partition_leader_epoch=3)
    info = log.append_as_follower(first + second[: len(second) // 2])
    assert isinstance(info, LogAppendInfo) and (info.first_offset, info.last_offset) == (0, 1)
    assert log.read(0, 10**6).records == first
    assert isinstance(log.append_as_follower(second), LogAppendInfo)
    assert log.read(0, 10**6).records == first + second


def test_idempotent_duplicate_and_sequence_errors():
    log = _open()
    b0 = _batch(2, producer_id=9, producer_epoch=0, base_sequence=0)
    first = log.append_as_leader(b0, 0)
    log.append_as_leader(_batch(1), 0)
    dup = log.append_as_leader(b0, 0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (first.first_offset, first.last_offset)
    assert log.log_end_offset == 3
    gap = log.append_as_leader(_batch(1, producer_id=9, producer_epoch=0, base_sequence=5), 0)
    assert gap.error_code == ErrorCode.out_of_order_sequence_number
    ok = log.append_as_leader(_batch(1, producer_id=9, producer_epoch=0, base_sequence=2), 0)
    assert isinstance(ok, LogAppendInfo) and ok.first_offset == 3
    new_epoch_bad = log.append_as_leader(_batch(1, producer_id=9, producer_epoch=1, base_sequence=3), 0)
    assert new_epoch_bad.error_code == ErrorCode.out_of_order_sequence_number
    assert isinstance(log.append_as_leader(_batch(1, producer_id=9, producer_epoch=1, base_sequence=0), 0),
                      LogAppendInfo)
    stale = log.append_as_leader(_batch(1, producer_id=9, producer_epoch=0, base_sequence=3), 0)
    assert stale.error_code == ErrorCode.invalid_producer_epoch
    unknown = log.append_as_leader(_batch(1, producer_id=77, producer_epoch=0, base_sequence=40), 0)
    assert isinstance(unknown, LogAppendInfo)  # KIP-360: an unknown producer may start anywhere


def test_producer_state_survives_restart():
    for clean in (True, False):
        fs = MemoryFileSystem()
        log = _open(fs)
        b0 = _batch(1, producer_id=9, producer_epoch=0, base_sequence=0)
        log.append_as_leader(b0, 0)
        if clean:
            log.close()
        again = _open(fs)
        assert again.append_as_leader(b0, 0).duplicate
        nxt = again.append_as_leader(_batch(1, producer_id=9, producer_epoch=0, base_sequence=1), 0)
        assert nxt.first_offset == 1


def test_last_stable_offset_follows_open_transactions():
    log = _open()
    log.append_as_leader(_batch(1), 0)
    log.append_as_leader(_batch(1, producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True), 0)
    log.append_as_leader(_batch(1), 0)
    log.update_high_watermark(3)
    assert log.last_stable_offset == 1
    marker = build_control_batch(ControlType.COMMIT, 5, 0, NOW, coordinator_epoch=0)
    from kmirror.log.append_analysis import AppendOrigin
    assert isinstance(log.append_as_leader(marker, 0, origin=AppendOrigin.COORDINATOR), LogAppendInfo)
    log.update_high_watermark(4)
    assert log.last_stable_offset == 4


def test_truncate_to_and_epoch_cache():
    log = _open(config=LogConfig(segment_bytes=300))
    for epoch in (1, 1, 2, 2, 3, 3):
        log.append_as_leader(_batch(1), epoch)
    assert [(e.epoch, e.start_offset) for e in log.epoch_cache.entries] == [(1, 0), (2, 2), (3, 4)]
    assert log.end_offset_for_epoch(2) == (2, 4)
    log.update_high_watermark(6)
    assert log.truncate_to(3)
    assert log.log_end_offset == 3 and log.high_watermark == 3
    assert [(e.epoch, e.start_offset) for e in log.epoch_cache.entries] == [(1, 0), (2, 2)]
    assert _offsets(log.read(0, 10**6).records)[-1:] in ([0], [1], [2])
    info = log.append_as_leader(_batch(1), 4)
    assert info.first_offset == 3
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, len(log.epoch_cache)) == (100, 100, 0)


def test_truncate_at_the_log_end_still_drops_an_epoch_without_records():
    # Kafka `UnifiedLog.truncateTo`: a leader that assigned its epoch at the log end and
    # wrote nothing leaves an entry no record has; truncation to the log end removes it
    # (and the checkpoint follows), no record is removed.
    fs = MemoryFileSystem()
    log = _open(fs)
    log.append_as_leader(_batch(2), 1)
    log.epoch_cache.assign(5, 2)
    assert log.truncate_to(2) is False
    assert log.log_end_offset == 2
    assert [(e.epoch, e.start_offset) for e in log.epoch_cache.entries] == [(1, 0)]
    log.close()
    reopened = _open(fs)
    assert [(e.epoch, e.start_offset) for e in reopened.epoch_cache.entries] == [(1, 0)]


def test_delete_records_and_retention():
    clock = ManualClock(NOW)
    log = _open(config=LogConfig(segment_bytes=300, retention_ms=10_000), clock=clock)
    for i in range(10):
        log.append_as_leader(_batch(1, ts=NOW + i), 0)
    assert isinstance(log.maybe_increment_log_start_offset(5), OffsetOutOfRange)  # beyond HW 0
    log.update_high_watermark(10)
    log.maybe_increment_log_start_offset(5)
    assert log.log_start_offset == 5
    assert all(s.base_offset <= 5 for s in log.segments[:1])
    assert isinstance(log.read(4, 100), OffsetOutOfRange)
    assert log.delete_old_segments(NOW + 5_000) == 0
    deleted = log.delete_old_segments(NOW + 20_000)
    assert deleted > 0 and log.log_start_offset == 10 and log.log_end_offset == 10
    assert log.active_segment.size == 0


def test_retention_bytes_keeps_newest():
    log = _open(config=LogConfig(segment_bytes=300, retention_bytes=400))
    for _ in range(10):
        log.append_as_leader(_batch(1), 0)
    log.update_high_watermark(10)
    log.delete_old_segments()
    assert log.size_bytes <= 400 + 300
    assert log.log_end_offset == 10 and log.log_start_offset > 0


def test_fetch_offset_by_timestamp():
    log = _open(config=LogConfig(segment_bytes=300))
    for i in range(6):
        log.append_as_leader(_batch(2, ts=NOW + 100 * i), i // 2)
    assert log.fetch_offset_by_timestamp(NOW + 150) == TimestampAndOffset(NOW + 200, 4, 1)
    assert log.fetch_offset_by_timestamp(NOW + 201).offset == 5
    assert log.fetch_offset_by_timestamp(NOW + 10_000) is None
    assert log.fetch_offset_by_timestamp(-1) == TimestampAndOffset(-1, 12, 2)
    assert log.fetch_offset_by_timestamp(-2) == TimestampAndOffset(-1, 0, 0)
    assert log.fetch_offset_by_timestamp(-3) == TimestampAndOffset(NOW + 501, 11, 2)


def test_log_append_time_topic_stamps_batches():
    log = _open(config=LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(_batch(1, ts=NOW - 5), 0, now_ms=NOW + 7)
    assert info.log_append_time_ms == NOW + 7
    header = read_header(log.read(0, 1000).records)
    assert header.timestamp_type == 1 and header.max_timestamp == NOW + 7


def test_truncation_rewinds_producer_state():
    log = _open()
    b0 = _batch(1, producer_id=9, producer_epoch=0, base_sequence=0)
    b1 = _batch(1, producer_id=9, producer_epoch=0, base_sequence=1)
    log.append_as_leader(b0, 0)
    log.append_as_leader(b1, 0)
    log.truncate_to(1)
    again = log.append_as_leader(b1, 0)
    assert not again.duplicate and again.first_offset == 1
    log.truncate_fully_and_start_at(50)
    assert log.producer_state.producers == {}


def test_a_truncation_rebuilds_the_producer_state_without_expired_producers():
    clock = ManualClock(NOW)
    log = _open(clock=clock)
    log.append_as_leader(_batch(1, ts=NOW - 10_000, producer_id=8, producer_epoch=0, base_sequence=0), 0)
    log.append_as_leader(_batch(1, producer_id=9, producer_epoch=0, base_sequence=0), 0)
    log.append_as_leader(_batch(1, producer_id=7, producer_epoch=0, base_sequence=0), 0)
    log.remove_expired_producers(expiration_ms=10_000)  # the node's producer.id.expiration.ms
    assert set(log.producer_state.producers) == {7, 9}
    log.truncate_to(2)  # producer 7's batch goes: rebuilt from the log, where producer 8's is
    assert set(log.producer_state.producers) == {9}


def test_marker_of_an_older_coordinator_epoch_is_fenced_also_after_reopen():
    fs = MemoryFileSystem()
    log = Log.open(fs, "/data/t-0", TP, LogConfig(), ManualClock(NOW))

    def marker(kind, coordinator_epoch, target=None):
        batch = build_control_batch(kind, 7, 0, NOW, coordinator_epoch=coordinator_epoch)
        return (target or log).append_as_leader(batch, 0, origin=AppendOrigin.COORDINATOR)

    data = build_batch([(b"k", b"v", (), NOW)], producer_id=7, producer_epoch=0, base_sequence=0,
                       is_transactional=True)
    assert not isinstance(log.append_as_leader(data, 0), AppendError)
    assert not isinstance(marker(ControlType.COMMIT, 5), AppendError)
    stale = marker(ControlType.ABORT, 4)
    assert isinstance(stale, AppendError) and stale.error_code == ErrorCode.transaction_coordinator_fenced
    assert not isinstance(marker(ControlType.ABORT, 5), AppendError)  # the same coordinator again
    log.close()
    reopened = Log.open(fs, "/data/t-0", TP, LogConfig(), ManualClock(NOW))
    again = marker(ControlType.COMMIT, 4, reopened)
    assert isinstance(again, AppendError) and again.error_code == ErrorCode.transaction_coordinator_fenced


def test_assigned_epochs_are_synced_with_the_recovery_point_and_rebuilt_after_a_crash():
    fs = MemoryFileSystem()
    config = LogConfig()
    log = _open(fs, config=config)
    for epoch in (1, 1, 2):
        log.append_as_leader(_batch(1), epoch)
    log.flush()
    synced = fs.fsync_count
    log.assign_epoch_start_offset(3, log.log_end_offset)  # a new leader: no fsync
    log.append_as_leader(_batch(1), 3)
    assert fs.fsync_count == synced
    fs.crash()  # the checkpoint falls back to epochs 1 and 2; the epoch-3 batch is past the recovery point
    again = _open(fs, config=config, recovery_point=3)
    assert [(e.epoch, e.start_offset) for e in again.epoch_cache.entries] == [(1, 0), (2, 2)]
    again.append_as_leader(_batch(1), 3)
    again.flush()
    fs.crash()
    assert [(e.epoch, e.start_offset) for e in _open(fs, config=config, recovery_point=4).epoch_cache.entries] == \
        [(1, 0), (2, 2), (3, 3)]


def test_a_torn_epoch_checkpoint_is_rebuilt_from_every_segment():
    fs = MemoryFileSystem()
    config = LogConfig(segment_bytes=200)
    log = _open(fs, config=config)
    for epoch in (1, 2, 2, 4, 5):
        log.append_as_leader(_batch(1), epoch)
    log.close()
    fs.write_file("/data/t-0/leader-epoch-checkpoint", b"0\n3\n1 0\n")  # torn
    again = _open(fs, config=config, recovery_point=5)
    assert [(e.epoch, e.start_offset) for e in again.epoch_cache.entries] == [(1, 0), (2, 1), (4, 3), (5, 4)]
