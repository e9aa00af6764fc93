import os
import resource

import pytest

from kmirror.runtime.os_fs import RESERVED_FDS, OsFileSystem
from kmirror.testing.memory_fs import MemoryFileSystem


@pytest.fixture(params=["memory", "os", "os, one open file"])
def fs_root(request, tmp_path):
    if request.param == "memory":
        fs = MemoryFileSystem()
        fs.mkdirs("/data")
        return fs, "/data"
    fs = OsFileSystem(1 if request.param == "os, one open file" else -1)
    yield_root = str(tmp_path)
    return fs, yield_root


def test_append_read_truncate_rename_delete(fs_root):
    fs, root = fs_root
    path = f"{root}/a.log"
    assert fs.append(path, b"hello") == 0
    assert fs.append(path, memoryview(b" world")) == 5
    assert fs.size(path) == 11
    assert fs.read(path, 6, 100) == b"world"
    assert fs.read_range(path, 0, 5) == b"hello"
    fs.truncate(path, 5)
    assert fs.read(path, 0, 100) == b"hello"
    assert fs.append(path, b"!") == 5
    fs.fsync(path)
    fs.mkdirs(f"{root}/sub/dir")
    fs.rename(path, f"{root}/sub/b.log")
    assert not fs.exists(path)
    assert fs.read(f"{root}/sub/b.log", 0, 10) == b"hello!"
    assert fs.listdir(root) == ["sub"]
    assert fs.listdir(f"{root}/sub") == ["b.log", "dir"]
    assert fs.is_dir(f"{root}/sub") and not fs.is_dir(f"{root}/sub/b.log")
    fs.write_file(f"{root}/sub/c", b"x")
    fs.delete(f"{root}/sub")
    assert not fs.exists(f"{root}/sub/b.log") and not fs.exists(f"{root}/sub")
    fs.delete(f"{root}/missing")


def test_write_file_replaces_the_content_whether_longer_shorter_or_empty(fs_root):
    fs, root = fs_root
    path = f"{root}/leader-epoch-checkpoint"
    for data in (b"0\n1\n0 0\n", b"0\n2\n0 0\n3 100\n", b"0\n1\n5 7\n", b""):
        fs.write_file(path, data)
        assert fs.size(path) == len(data)
        assert fs.read(path, 0, 100) == data


def test_rename_directory_moves_contents(fs_root):
    fs, root = fs_root
    fs.mkdirs(f"{root}/t-0")
    fs.append(f"{root}/t-0/x", b"1")
    fs.rename(f"{root}/t-0", f"{root}/t-0.abc-delete")
    assert fs.read(f"{root}/t-0.abc-delete/x", 0, 1) == b"1"
    assert not fs.exists(f"{root}/t-0")


def test_memory_crash_loses_unflushed_only():
    fs = MemoryFileSystem()
    fs.mkdirs("/d")
    fs.append("/d/f", b"durable")
    fs.fsync("/d/f")
    fs.append("/d/f", b"-lost")
    fs.append("/d/g", b"never synced")
    fs.crash()
    assert fs.read("/d/f", 0, 100) == b"durable"
    assert fs.exists("/d/g") and fs.size("/d/g") == 0


def test_memory_crash_can_tear_the_unflushed_tail():
    fs = MemoryFileSystem()
    fs.mkdirs("/d")
    fs.append("/d/f", b"abc")
    fs.fsync("/d/f")
    fs.append("/d/f", b"defgh")
    assert fs.unflushed_bytes("/d/f") == 5
    fs.crash(lambda path, n: 2)
    assert fs.read("/d/f", 0, 100) == b"abcde"


def test_memory_missing_parent_is_an_error():
    fs = MemoryFileSystem()
    with pytest.raises(FileNotFoundError):
        fs.append("/nope/f", b"x")


def _open_fds(directory) -> int:
    """The process's descriptors open on files under `directory` (other threads of a test
    process, a client's say, open and close their own meanwhile)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except FileNotFoundError:  # closed meanwhile
            continue
        count += target.startswith(f"{directory}/")
    return count


def test_open_handles_stay_within_the_bound_and_every_file_reads_back(tmp_path):
    fs = OsFileSystem(max_open_files=3)
    before = _open_fds(tmp_path)
    paths = [f"{tmp_path}/{i:05d}.log" for i in range(50)]
    for round_ in range(3):  # interleaved appends: every file is closed and reopened in turn
        for i, path in enumerate(paths):
            assert fs.append(path, b"%d.%d;" % (i, round_)) == round_ * len(b"%d.%d;" % (i, 0))
            assert fs.open_files() <= 3
            assert _open_fds(tmp_path) <= before + 3
    for i, path in enumerate(paths):
        fs.fsync(path)  # through a new handle: the bytes written through closed ones are there
        assert fs.read(path, 0, 100) == b"%d.0;%d.1;%d.2;" % (i, i, i)
        assert fs.size(path) == len(b"%d.0;%d.1;%d.2;" % (i, i, i))
    assert fs.evictions >= 3 * len(paths) - 3
    fs.close_all()
    assert fs.open_files() == 0 and _open_fds(tmp_path) == before


def test_the_most_recently_used_handles_stay_open(tmp_path):
    fs = OsFileSystem(max_open_files=2)
    a, b, c = (f"{tmp_path}/{n}" for n in "abc")
    for path in (a, b):
        fs.append(path, b"x")
    fs.read(a, 0, 1)  # a is now the most recent: c's open closes b's handle
    fs.append(c, b"y")
    evictions = fs.evictions
    fs.read(a, 0, 1)
    fs.read(c, 0, 1)
    assert fs.evictions == evictions
    fs.read(b, 0, 1)
    assert fs.evictions == evictions + 1


def test_the_default_bound_leaves_a_reserve_of_the_descriptor_limit():
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY:
        assert OsFileSystem().max_open_files == max(16, soft // 2, soft - RESERVED_FDS)


def test_a_file_appended_without_keep_open_holds_no_handle(tmp_path):
    fs = OsFileSystem(max_open_files=2)
    index, log = str(tmp_path / "0.index"), str(tmp_path / "0.log")
    assert fs.append(index, b"ab", keep_open=False) == 0
    assert fs.append(index, b"cd", keep_open=False) == 2
    fs.append(log, b"records")
    assert list(fs._fds) == [log]  # only the log's handle is kept
    assert fs.read(index, 0, 4) == b"abcd"
    assert fs.append(index, b"ef", keep_open=False) == 4  # an open handle is used when there is one
    assert fs.read(index, 0, 6) == b"abcdef" and fs.evictions == 0


def test_rename_all_closes_only_the_files_under_the_moved_directories(tmp_path):
    fs = OsFileSystem()
    paths = {name: str(tmp_path / name / "00000000000000000000.log") for name in ("t-0", "t-1", "t-10")}
    for name, path in paths.items():
        fs.mkdirs(str(tmp_path / name))
        fs.append(path, name.encode())
    assert fs.open_files() == 3
    fs.rename_all([(str(tmp_path / "t-1"), str(tmp_path / "t-1.deleted")),
                   (str(tmp_path / "t-0"), str(tmp_path / "t-0.deleted"))])
    assert fs.open_files() == 1  # t-10 stays open: a name prefix is not a parent directory
    assert fs.read(str(tmp_path / "t-1.deleted" / "00000000000000000000.log"), 0, 3) == b"t-1"
    assert fs.read(paths["t-10"], 0, 4) == b"t-10"
