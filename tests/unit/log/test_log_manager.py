import shutil
import uuid

import pytest

from kmirror.config.server import ServerConfig
from kmirror.log.config import LogConfig
from kmirror.log.fs import KafkaStorageError
from kmirror.log.log_manager import LogManager, parse_partition_dir
from kmirror.ports import ManualClock
from kmirror.records.builder import build_batch
from kmirror.records.record import iter_records
from kmirror.runtime.os_fs import OsFileSystem
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.types import TopicPartition

NOW = 1_700_000_000_000
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("my-topic.x", 0)


def _batch(n=1, ts=NOW):
    return build_batch([(None, b"v", (), ts + i) for i in range(n)])


def _manager(fs, dirs=("/d1", "/d2"), config=None):
    m = LogManager(fs, list(dirs), ManualClock(NOW), config or LogConfig())
    m.load_logs()
    return m


def test_parse_partition_dir():
    assert parse_partition_dir("my-topic.x-3") == TopicPartition("my-topic.x", 3)
    assert parse_partition_dir("t-0.0123abc-delete") is None
    assert parse_partition_dir("meta.properties") is None
    assert parse_partition_dir("t-0-future") is None


def test_create_spread_checkpoint_and_reload():
    fs = MemoryFileSystem()
    m = _manager(fs)
    tid = uuid.UUID(int=1)
    logs = [m.get_or_create_log(tp, tid) for tp in (A0, A1, B0)]
    assert {m.log_dir_of(A0), m.log_dir_of(A1)} == {"/d1", "/d2"}
    assert m.get_or_create_log(A0) is logs[0]
    for log in logs:
        log.append_as_leader(_batch(3), 0)
        log.update_high_watermark(3)
    logs[0].maybe_increment_log_start_offset(2)
    m.close()
    d = m.log_dir_of(A0)
    assert fs.read(f"{d}/recovery-point-offset-checkpoint", 0, 1000).decode().startswith("0\n")
    assert "a 0 2" in fs.read(f"{d}/log-start-offset-checkpoint", 0, 1000).decode()
    fs.mkdirs("/d1/__cluster_metadata-0")
    fs.mkdirs("/d1/a-7.00000000000000000000000000000001-delete")
    again = _manager(fs)
    assert sorted(again.logs) == sorted([A0, A1, B0])
    assert again.get_log(A0).log_start_offset == 2
    assert again.get_log(A0).log_end_offset == 3
    assert again.get_log(A0).high_watermark == 3
    assert not fs.exists("/d1/a-7.00000000000000000000000000000001-delete")
    assert fs.exists("/d1/__cluster_metadata-0")


def test_delete_log_renames_then_removes():
    fs = MemoryFileSystem()
    m = _manager(fs, dirs=("/d1",))
    m.get_or_create_log(A0).append_as_leader(_batch(), 0)
    assert m.delete_log(A0)
    assert fs.listdir("/d1") == sorted(["log-start-offset-checkpoint", "recovery-point-offset-checkpoint",
                                        "replication-offset-checkpoint"])
    assert m.get_log(A0) is None and not m.delete_log(A0)


def test_retention_and_flush_dirty():
    fs = MemoryFileSystem()
    clock = ManualClock(NOW)
    m = LogManager(fs, ["/d"], clock, LogConfig(segment_bytes=200, retention_ms=1000, flush_ms=500))
    m.load_logs()
    log = m.get_or_create_log(A0)
    for i in range(5):
        log.append_as_leader(_batch(ts=NOW + i), 0)
    log.update_high_watermark(5)
    assert fs.unflushed_bytes(log.active_segment.log_path) > 0
    assert m.flush_dirty(clock.now_ms()) == 0
    clock.advance(600)
    assert m.flush_dirty(clock.now_ms()) == 1
    assert fs.unflushed_bytes(log.active_segment.log_path) == 0
    assert m.run_retention(NOW + 10_000) > 0
    assert log.log_start_offset == 5


def test_kill_without_close_loses_nothing_on_a_real_file_system(tmp_path):
    fs = OsFileSystem()
    m = _manager(fs, dirs=(str(tmp_path),))
    log = m.get_or_create_log(A0)
    for _ in range(4):
        log.append_as_leader(_batch(2), 1)
    fs.close_all()  # the process dies: no flush, no checkpoint
    again = _manager(OsFileSystem(), dirs=(str(tmp_path),))
    reopened = again.get_log(A0)
    assert reopened.log_end_offset == 8
    assert [r.offset for r in iter_records(reopened.read(0, 10**6).records)] == list(range(8))
    assert (tmp_path / "a-0" / "00000000000000000000.log").exists()
    assert (tmp_path / "a-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"


def test_log_config_from_server_config():
    cfg = ServerConfig.from_properties({
        "node.id": "1", "process.roles": "broker,controller", "log.dirs": "/tmp/x",
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093", "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": "1@localhost:9093",
        "log.segment.bytes": "1048576", "log.retention.hours": "1", "log.message.timestamp.type": "LogAppendTime",
    })
    c = LogConfig.from_server_config(cfg)
    assert c.segment_bytes == 1048576
    assert c.retention_ms == 3_600_000
    assert c.log_append_time
    assert c.max_message_bytes == 1048588


def test_a_new_logs_topic_id_is_written_unsynced_and_made_durable_by_flush_new_logs():
    fs = MemoryFileSystem()
    m = _manager(fs, dirs=("/d1",))
    tid = uuid.UUID(int=5)
    before = fs.fsync_count
    m.get_or_create_log(A0, tid)
    assert fs.fsync_count == before  # creation costs no fsync (Kafka defers its metadata flush)
    assert m.has_new_logs
    assert fs.read("/d1/a-0/partition.metadata", 0, 100).startswith(b"version: 0")  # survives a process kill
    fs.crash()  # a machine crash before the flush: the file is empty, read as absent
    assert LogManager(fs, ["/d1"], ManualClock(NOW), LogConfig()).get_or_create_log(A0).topic_id is None

    fs = MemoryFileSystem()
    m = _manager(fs, dirs=("/d1",))
    m.get_or_create_log(A0, tid)
    assert m.flush_new_logs() == 1 and not m.has_new_logs
    fs.crash()
    fresh = _manager(fs, dirs=("/d1",))
    assert fresh.get_log(A0) is not None and fresh.get_log(A0).topic_id == tid


def test_a_logs_first_flush_makes_its_topic_id_durable_before_its_records():
    fs = MemoryFileSystem()
    m = _manager(fs, dirs=("/d1",))
    tid = uuid.UUID(int=6)
    log = m.get_or_create_log(A0, tid)
    log.append_as_leader(_batch(2), 0)
    log.flush()
    fs.crash()
    reloaded = _manager(fs, dirs=("/d1",)).get_log(A0)
    assert reloaded is not None and reloaded.topic_id == tid and reloaded.log_end_offset == 2


def test_a_log_deleted_before_its_flush_gets_no_late_topic_id_file():
    fs = MemoryFileSystem()
    m = _manager(fs, dirs=("/d1",))
    m.get_or_create_log(A0, uuid.UUID(int=7))
    m.delete_log(A0)
    new = m.get_or_create_log(A0, uuid.UUID(int=8))  # the topic created again under the same name
    m.flush_new_logs()
    fs.crash()
    assert new.partition_metadata.read() == uuid.UUID(int=8)
    assert [n for n in fs.files() if n.endswith("partition.metadata")] == ["/d1/a-0/partition.metadata"]


def test_a_failed_dir_goes_offline_and_what_was_placed_elsewhere_is_not_created_anew(tmp_path):
    """KIP-858: a dir that fails to load is offline (`dir_failed` told), the other loads; while a
    dir is offline a log that is not new is refused, a new one goes to an online dir; a dir
    failing later drops its logs and is left out of the checkpoints."""
    first, second, third = (str(tmp_path / d) for d in ("d1", "d2", "d3"))
    m = _manager(OsFileSystem(), dirs=(first, second, third))
    for tp in (A0, A1, B0):
        m.get_or_create_log(tp, uuid.UUID(int=1)).append_as_leader(_batch(2), 0)
    placed = {tp: m.log_dir_of(tp) for tp in (A0, A1, B0)}
    assert set(placed.values()) == {first, second, third}
    m.close()
    shutil.rmtree(second)
    (tmp_path / "d2").write_text("")  # a file where the dir was
    failed: list[str] = []
    again = LogManager(OsFileSystem(), [first, second, third], ManualClock(NOW), LogConfig())
    again.load_logs(lambda log_dir, exc: failed.append(log_dir))
    assert failed == [second] and again.offline_dirs == {second}
    lost = next(tp for tp, d in placed.items() if d == second)
    assert sorted(again.logs) == sorted(tp for tp in placed if tp != lost)
    with pytest.raises(KafkaStorageError, match="may be there"):
        again.get_or_create_log(lost, uuid.UUID(int=1), is_new=False)
    assert again.log_dir_of(again.get_or_create_log(TopicPartition("new", 0), uuid.UUID(int=2))) != second
    kept = next(tp for tp, d in placed.items() if d == third)
    assert again.take_dir_offline(third) == [kept] and again.get_log(kept) is None
    assert {d for d, _, _ in again.checkpoint_snapshot()} == {first}
    again.close()


def test_checkpoints_of_the_other_dirs_are_written_when_one_dir_fails_meanwhile(tmp_path):
    """A dir that fails while the checkpoints are written (its failure reported, so it goes
    offline) does not keep the other dirs' checkpoints from being written in that round."""
    first, second = str(tmp_path / "d1"), str(tmp_path / "d2")
    fs = OsFileSystem()
    m = _manager(fs, dirs=(second, first))  # the failing dir's checkpoints come first
    for tp in (A0, A1):
        m.get_or_create_log(tp, uuid.UUID(int=1)).append_as_leader(_batch(2), 0)
    assert {m.log_dir_of(tp) for tp in (A0, A1)} == {first, second}
    snapshot = m.checkpoint_snapshot()
    for checkpoint in (tmp_path / "d1").glob("*checkpoint"):
        checkpoint.unlink()
    (tmp_path / "d2").rename(tmp_path / "d2-gone")
    (tmp_path / "d2").write_text("")  # the disk is gone: a file where the dir was
    reported: list[str] = []

    def failed(path: str, exc: OSError) -> None:
        reported.append(path)
        raise KafkaStorageError(second, str(exc))

    fs.on_failure = failed
    m.write_checkpoints(snapshot)
    assert reported and all(p.startswith(second) for p in reported)
    assert (tmp_path / "d1" / "replication-offset-checkpoint").is_file()
    assert (tmp_path / "d1" / "recovery-point-offset-checkpoint").is_file()
