"""Which logs and offsets the cleaner picks, its bookkeeping, throttle and configuration."""

from __future__ import annotations

import pytest

from kmirror.config.server import ConfigError, ServerConfig
from kmirror.log.append_analysis import AppendOrigin
from kmirror.log.cleaner.checkpoint import CLEANER_OFFSET_CHECKPOINT
from kmirror.log.cleaner.cleanable import filthiest, log_to_clean
from kmirror.log.cleaner.config import DOUBLE_MAX, CleanerConfig
from kmirror.log.cleaner.manager import LogCleanerManager
from kmirror.log.cleaner.throttler import Throttler
from kmirror.log.config import LogConfig
from kmirror.log.log import Log
from kmirror.ports import ManualClock
from kmirror.records.builder import build_batch
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.types import TopicPartition

NOW = 1_700_000_000_000


def make_log(config: LogConfig, segments: list[list[int]], fs: MemoryFileSystem | None = None,
             topic: str = "t") -> Log:
    """One segment per list of record timestamps, then an active segment with one record."""
    fs = fs or MemoryFileSystem()
    log = Log.open(fs, f"/data/{topic}-0", TopicPartition(topic, 0), config, ManualClock(NOW))
    for timestamps in segments:
        for ts in timestamps:
            log.append_as_leader(build_batch([(b"k", b"v", (), ts)]), 0, now_ms=ts)
        log.roll()
    log.append_as_leader(build_batch([(b"k", b"v", (), NOW)]), 0, now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)
    return log


COMPACT = LogConfig(cleanup_policy=("compact",))


def test_dirty_ratio_against_min_cleanable_dirty_ratio() -> None:
    log = make_log(COMPACT, [[NOW] * 3, [NOW] * 3])
    target = log_to_clean(log, None, NOW)
    assert (target.first_dirty_offset, target.first_uncleanable_offset) == (0, 6)
    assert target.cleanable_ratio == 1.0 and filthiest([target]) is target
    half = log_to_clean(log, 3, NOW)
    assert half.first_dirty_offset == 3 and half.cleanable_ratio == pytest.approx(0.5)
    assert filthiest([half]) is None  # 0.5 is not above min.cleanable.dirty.ratio=0.5
    assert log_to_clean(log, 6, NOW).cleanable_bytes == 0


def test_a_checkpoint_outside_the_log_restarts_at_the_log_start() -> None:
    log = make_log(COMPACT, [[NOW] * 3])
    assert log_to_clean(log, 99, NOW).first_dirty_offset == 0
    assert log_to_clean(log, -4, NOW).first_dirty_offset == 0


def test_min_compaction_lag_keeps_recent_segments_dirty() -> None:
    config = LogConfig(cleanup_policy=("compact",), min_compaction_lag_ms=60_000)
    log = make_log(config, [[NOW - 120_000] * 2, [NOW - 30_000] * 2, [NOW - 90_000] * 2])
    assert log_to_clean(log, None, NOW).first_uncleanable_offset == 2


def test_max_compaction_lag_forces_a_log_below_its_ratio() -> None:
    config = LogConfig(cleanup_policy=("compact",), max_compaction_lag_ms=60_000, min_cleanable_dirty_ratio=0.9)
    log = make_log(config, [[NOW - 120_000] * 2, [NOW] * 2, [NOW] * 2])
    target = log_to_clean(log, 2, NOW)
    assert target.cleanable_ratio < 0.9
    assert not target.needs_compaction_now  # the first dirty segment is recent
    old_dirty = log_to_clean(log, 0, NOW)
    assert old_dirty.max_compaction_delay_ms == 60_000 and filthiest([old_dirty]) is old_dirty


def test_an_open_transaction_bounds_the_cleanable_section() -> None:
    log = make_log(COMPACT, [[NOW] * 2])
    log.roll()
    txn = build_batch([(b"k", b"t", (), NOW)], producer_id=4, producer_epoch=0, base_sequence=0,
                      is_transactional=True)
    log.append_as_leader(txn, 0, now_ms=NOW, origin=AppendOrigin.CLIENT)
    log.roll()
    log.append_as_leader(build_batch([(b"k", b"v", (), NOW)]), 0, now_ms=NOW)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 3
    assert log_to_clean(log, None, NOW).first_uncleanable_offset == 3


def test_manager_skips_delete_only_logs_logs_in_progress_and_refused_ones() -> None:
    fs = MemoryFileSystem()
    compacted = make_log(COMPACT, [[NOW] * 2], fs, "a")
    deleted = make_log(LogConfig(), [[NOW] * 2], fs, "b")
    other = make_log(COMPACT, [[NOW] * 2], fs, "c")
    manager = LogCleanerManager(fs)
    logs = [(compacted, "/data"), (deleted, "/data"), (other, "/data")]
    first = manager.grab_filthiest_log(logs, NOW, may_clean=lambda tp: tp.topic != "c")
    assert first is not None and first.log is compacted
    assert manager.grab_filthiest_log(logs, NOW, may_clean=lambda tp: tp.topic != "c") is None
    manager.done_cleaning(compacted, "/data", 2, NOW, NOW + 500, [compacted.topic_partition])
    text = fs.read(f"/data/{CLEANER_OFFSET_CHECKPOINT}", 0, 100).decode()
    assert text == "0\n1\na 0 2\n"
    assert manager.grab_filthiest_log(logs, NOW, may_clean=lambda tp: tp.topic != "c") is None
    # KIP-534: once the latest delete horizon passed, the log is cleaned again
    again = manager.grab_filthiest_log(logs, NOW + 500, may_clean=lambda tp: tp.topic != "c")
    assert again is not None and again.log is compacted
    manager.mark_uncleanable(compacted.topic_partition)
    assert manager.grab_filthiest_log(logs, NOW + 500, may_clean=lambda tp: tp.topic != "c") is None
    assert LogCleanerManager(fs).checkpoints("/data") == {TopicPartition("a", 0): 2}


def test_throttler_pauses_to_hold_the_rate() -> None:
    throttler = Throttler(1000.0, start_ms=0, check_interval_ms=100)
    assert throttler.pause_ms(50, now_ms=50) == 0
    assert throttler.pause_ms(950, now_ms=100) == 900  # 1000 bytes at 1000 B/s take 1 s
    assert Throttler(DOUBLE_MAX, 0).pause_ms(10**12, 1000) == 0


def test_cleaner_configs_have_kafkas_names_and_defaults() -> None:
    cfg = ServerConfig.from_properties({"node.id": "1"})
    assert CleanerConfig.from_values(cfg.values) == CleanerConfig(
        num_threads=1, dedupe_buffer_size=134217728, dedupe_buffer_load_factor=0.9, io_buffer_size=524288,
        max_io_bytes_per_second=DOUBLE_MAX, backoff_ms=15000, enable_cleaner=True)
    tuned = ServerConfig.from_properties({"node.id": "1", "log.cleaner.threads": "2",
                                          "log.cleaner.io.max.bytes.per.second": "1048576",
                                          "log.cleaner.dedupe.buffer.size": "1000000", "log.cleaner.enable": "false",
                                          "log.cleaner.backoff.ms": "100"})
    config = CleanerConfig.from_values(tuned.values)
    assert (config.num_threads, config.max_io_bytes_per_second, config.dedupe_buffer_size_per_thread,
            config.enable_cleaner, config.backoff_ms) == (2, 1048576.0, 500000, False, 100)
    with pytest.raises(ConfigError, match="log.cleaner.io.buffer.load.factor"):
        ServerConfig.from_properties({"node.id": "1", "log.cleaner.io.buffer.load.factor": "2"})
    with pytest.raises(ConfigError, match="log.cleaner.threads"):
        ServerConfig.from_properties({"node.id": "1", "log.cleaner.threads": "-1"})
