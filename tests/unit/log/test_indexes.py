import struct

from kmirror.log.offset_index import OffsetIndex
from kmirror.log.time_index import TimeIndex
from kmirror.testing.memory_fs import MemoryFileSystem


def _fs():
    fs = MemoryFileSystem()
    fs.mkdirs("/p")
    return fs


def test_offset_index_format_and_lookup():
    fs = _fs()
    idx = OffsetIndex(fs, "/p/00000000000000000100.index", 100, 1024)
    assert idx.load() is False
    assert idx.lookup(150) == (100, 0)
    idx.append(110, 4096)
    idx.append(130, 8200)
    assert fs.size(idx.path) == 0  # written behind: at a flush (or close, rename, truncation)
    idx.flush()
    assert fs.read(idx.path, 0, 100) == struct.pack(">iiii", 10, 4096, 30, 8200)
    assert idx.lookup(109) == (100, 0)
    assert idx.lookup(110) == (110, 4096)
    assert idx.lookup(129) == (110, 4096)
    assert idx.lookup(10**9) == (130, 8200)
    again = OffsetIndex(fs, idx.path, 100, 1024)
    assert again.load() and again.entries() == [(110, 4096), (130, 8200)]
    again.truncate_to(130)
    assert again.entries() == [(110, 4096)] and fs.size(idx.path) == 8
    again.truncate_to_position(0)
    assert len(again) == 0 and fs.size(idx.path) == 0


def test_offset_index_rejects_corrupt_file_and_tracks_fullness():
    fs = _fs()
    fs.write_file("/p/x.index", b"\x00" * 7)
    assert OffsetIndex(fs, "/p/x.index", 0, 1024).load() is False
    fs.write_file("/p/x.index", struct.pack(">iiii", 5, 100, 4, 200))
    assert OffsetIndex(fs, "/p/x.index", 0, 1024).load() is False
    idx = OffsetIndex(fs, "/p/y.index", 0, 16)
    idx.load()
    idx.append(1, 1)
    assert not idx.is_full
    idx.append(2, 2)
    assert idx.is_full


def test_time_index_format_lookup_and_monotonic_appends():
    fs = _fs()
    idx = TimeIndex(fs, "/p/00000000000000000100.timeindex", 100, 1200)
    idx.load()
    assert idx.lookup(5) == (-1, 100)
    idx.maybe_append(1000, 105)
    idx.maybe_append(1000, 107)  # not above the last timestamp: ignored
    idx.maybe_append(900, 108)  # ignored
    idx.maybe_append(2000, 110)
    assert idx.entries() == [(1000, 105), (2000, 110)]
    idx.flush()
    assert fs.read(idx.path, 0, 100) == struct.pack(">qiqi", 1000, 5, 2000, 10)
    assert idx.lookup(999) == (-1, 100)
    assert idx.lookup(1500) == (1000, 105)
    assert idx.lookup(2000) == (2000, 110)
    idx.truncate_to(106)
    assert idx.entries() == [(1000, 105)]
    assert idx.last_entry == (1000, 105)


def test_entries_are_written_behind_and_reach_the_file_before_it_is_moved_or_cut():
    fs = _fs()
    idx = OffsetIndex(fs, "/p/00000000000000000000.index", 0, 1 << 20)
    idx.load()
    for n in range(1, 513):  # 512 entries of 8 bytes: one write of 4 KiB once they add up
        idx.append(n, n * 100)
        assert fs.size(idx.path) == (0 if n < 512 else 4096)
    idx.append(600, 60_000)
    idx.truncate_to(600)  # a truncation writes first, then cuts
    assert fs.size(idx.path) == 4096 and len(idx) == 512
    idx.append(700, 70_000)
    idx.close()
    again = OffsetIndex(fs, idx.path, 0, 1 << 20)
    assert again.load() and again.entries()[-1] == (700, 70_000) and len(again) == 513
