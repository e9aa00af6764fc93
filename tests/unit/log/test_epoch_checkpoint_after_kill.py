"""The leader-epoch checkpoint a killed process left unsynced in the page cache is synced by the
next process before its recovery point moves, so a later power loss cannot take it back."""
from kmirror.log.config import LogConfig
from kmirror.log.epoch_cache import EpochEntry
from kmirror.log.log import Log
from kmirror.ports import ManualClock
from kmirror.records.builder import build_batch
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.types import TopicPartition

NOW = 1_700_000_000_000


def _open(fs: MemoryFileSystem, recovery_point: int) -> Log:
    return Log.open(fs, "/data/t-0", TopicPartition("t", 0), LogConfig(segment_bytes=400), ManualClock(NOW),
                    recovery_point=recovery_point)


def test_an_epoch_file_written_unsynced_before_a_kill_survives_a_later_power_loss():
    fs = MemoryFileSystem()
    log = _open(fs, 0)
    log.append_as_leader(build_batch([(None, b"a", (), NOW)]), 0)
    log.truncate_to(0)  # writes the now empty epoch file, synced
    log.append_as_leader(build_batch([(None, b"b" * 300, (), NOW)]), 0)  # "0 0", unsynced
    # kill -9: no close, the page cache keeps every write; the next process opens the log
    log = _open(fs, 0)
    assert log.epoch_cache.entries == [EpochEntry(0, 0)]
    log.append_as_leader(build_batch([(None, b"c" * 300, (), NOW)]), 0)  # rolls: offset 0 now in an older segment
    log.flush()  # the recovery point moves past offset 0
    recovery_point = log.recovery_point
    fs.crash(lambda path, n: 0)  # power loss: unsynced writes are gone
    log = _open(fs, recovery_point)
    assert log.log_end_offset == 2
    assert log.epoch_cache.entries == [EpochEntry(0, 0)]
