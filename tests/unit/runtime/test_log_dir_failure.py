"""A storage failure (the OS refusing a read or a write) goes to the node's halt; other errors
do not. Files on /dev/full refuse every write with ENOSPC, as a full disk does."""

from __future__ import annotations

import errno
import logging
import shutil
from pathlib import Path

import pytest

from kmirror.log.fs import KafkaStorageError
from kmirror.runtime.log_dir_failure import LogDirFailureHandler
from kmirror.runtime.metadata_log import METADATA_PARTITION_DIR, FileMetadataLogStore, segment_name
from kmirror.runtime.os_fs import OsFileSystem


class Halted(Exception):
    pass


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int | None]] = []

    def __call__(self, path: str, exc: OSError) -> None:
        self.calls.append((path, exc.errno))
        raise Halted


def on_full_disk(tmp_path: Path, name: str = "00000000000000000000.log") -> str:
    path = tmp_path / name
    path.symlink_to("/dev/full")
    return str(path)


def test_append_and_write_file_refused_by_the_disk(tmp_path: Path) -> None:
    recorder = Recorder()
    fs = OsFileSystem(on_failure=recorder)  # type: ignore[arg-type]
    path = on_full_disk(tmp_path)
    with pytest.raises(Halted):
        fs.append(path, b"batch")
    with pytest.raises(Halted):
        fs.write_file(path, b"checkpoint")
    assert recorder.calls == [(path, errno.ENOSPC), (path, errno.ENOSPC)]


def test_without_on_failure_the_error_is_raised(tmp_path: Path) -> None:
    with pytest.raises(OSError) as raised:
        OsFileSystem().append(on_full_disk(tmp_path), b"batch")
    assert raised.value.errno == errno.ENOSPC


def test_a_missing_file_is_not_a_storage_failure_unless_its_log_dir_is_gone(tmp_path: Path) -> None:
    first, second = tmp_path / "d1", tmp_path / "d2"
    for d in (first, second):
        (d / "t-0").mkdir(parents=True)
    handler = LogDirFailureHandler([str(first), str(second)], halt=lambda code: None)
    offline: list[str] = []
    handler.on_offline = offline.append
    fs = OsFileSystem(on_failure=handler)
    with pytest.raises(FileNotFoundError):
        fs.read(str(second / "t-0" / "gone.log"), 0, 10)
    with pytest.raises(FileNotFoundError):
        fs.rename(str(second / "t-0" / "gone.log"), str(second / "t-0" / "other.log"))
    assert offline == [] and handler.offline == set()
    shutil.rmtree(second)  # the dir itself vanished (deleted, or its disk unmounted)
    with pytest.raises(KafkaStorageError):
        fs.write_file(str(second / "t-0" / "leader-epoch-checkpoint"), b"0\n")
    assert offline == [str(second)]


def test_a_rename_batch_names_its_first_source(tmp_path: Path) -> None:
    recorder = Recorder()
    fs = OsFileSystem(on_failure=recorder)  # type: ignore[arg-type]

    def refuse(*_: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    fs.close = refuse  # type: ignore[method-assign]  # the first step of a rename
    with pytest.raises(Halted):
        fs.rename_all([(str(tmp_path / "a.cleaned"), str(tmp_path / "a.log"))])
    assert recorder.calls == [(str(tmp_path / "a.cleaned"), errno.EIO)]


def test_the_metadata_log_refused_by_the_disk_halts_before_its_next_record(tmp_path: Path) -> None:
    recorder = Recorder()
    store = FileMetadataLogStore(tmp_path, now_ms=lambda: 1000, on_failure=recorder)  # type: ignore[arg-type]
    (tmp_path / METADATA_PARTITION_DIR).mkdir()
    on_full_disk(tmp_path / METADATA_PARTITION_DIR, segment_name(0))
    with pytest.raises(Halted):
        store.append([b"record"])
    assert recorder.calls == [(str(tmp_path / METADATA_PARTITION_DIR / segment_name(0)), errno.ENOSPC)]
    assert store.append([]) == -1  # nothing counted as written


def test_the_handler_logs_kafkas_lines_and_halts_with_1(caplog: pytest.LogCaptureFixture) -> None:
    codes: list[int] = []
    handler = LogDirFailureHandler(["/data/kafka-logs"], halt=codes.append)
    with caplog.at_level(logging.INFO), pytest.raises(SystemExit):
        handler("/data/kafka-logs/t-0/00000000000000000000.log", OSError(errno.ENOSPC, "No space left on device"))
    assert codes == [1]
    assert caplog.messages == [
        "Error while accessing /data/kafka-logs/t-0/00000000000000000000.log in dir /data/kafka-logs: "
        "[Errno 28] No space left on device",
        "Stopping serving replicas in dir /data/kafka-logs",
        "Shutdown broker because all log dirs in /data/kafka-logs have failed",
    ]


def test_a_failed_dir_goes_offline_and_the_node_halts_only_for_the_metadata_dir_or_the_last_one(
        caplog: pytest.LogCaptureFixture) -> None:
    codes: list[int] = []
    handler = LogDirFailureHandler(["/d1", "/d2", "/d3", "/d4"], halt=codes.append)
    handler.load_failed("/d4", NotADirectoryError(errno.ENOTDIR, "Not a directory"))  # at load: offline from the start
    assert handler.offline == {"/d4"} and caplog.messages[-1].startswith("Error while loading log dir /d4")
    offline: list[str] = []
    handler.on_offline = offline.append
    with pytest.raises(KafkaStorageError, match="/d2 is offline"):
        handler("/d2/t-0/00000000000000000000.log", OSError(errno.EIO, "Input/output error"))
    with pytest.raises(KafkaStorageError):  # the same dir again: offline already
        handler("/d2/t-1/00000000000000000000.index", OSError(errno.ENOTDIR, "Not a directory"))
    assert offline == ["/d2"] and handler.offline == {"/d2", "/d4"} and codes == []
    with pytest.raises(SystemExit):  # the metadata log's dir halts
        handler("/d1/__cluster_metadata-0/00000000000000000000.log", OSError(errno.EIO, "Input/output error"))
    assert caplog.messages[-1] == "Shutdown broker because the metadata log dir /d1 has failed"
    handler.offline.add("/d1")
    with pytest.raises(SystemExit):  # the last one online halts
        handler("/d3/t-2/00000000000000000000.log", OSError(errno.ENOSPC, "No space left on device"))
    assert caplog.messages[-1] == "Shutdown broker because all log dirs in /d1, /d2, /d3, /d4 have failed"
    assert codes == [1, 1]


def test_the_failed_dir_is_the_one_holding_the_file() -> None:
    handler = LogDirFailureHandler(["/d/logs", "/d/logs-2/", "/e"])
    assert handler.dir_of("/d/logs-2/t-0/0.log") == "/d/logs-2"
    assert handler.dir_of("/d/logs/t-0/0.log") == "/d/logs"
    assert handler.dir_of("/e/__cluster_metadata-0/0.log") == "/e"
    assert handler.dir_of("/elsewhere/x.log") == "/elsewhere"
