from kmirror.log.segment import LogSegment
from kmirror.records.batch import iter_batches
from kmirror.records.builder import build_batch
from kmirror.testing.memory_fs import MemoryFileSystem


def _batch(base_offset, n=1, ts=1000, value=b"v" * 50):
    return build_batch([(None, value, (), ts + i) for i in range(n)], base_offset=base_offset)


def _segment(fs, base=0, interval=100):
    fs.mkdirs("/p")
    return LogSegment(fs, "/p", base, index_interval_bytes=interval, max_index_size=1024, created_ms=0)


def test_file_names_are_twenty_digit_base_offsets():
    seg = _segment(MemoryFileSystem(), base=42)
    assert seg.log_path == "/p/00000000000000000042.log"
    assert seg.offset_index.path == "/p/00000000000000000042.index"
    assert seg.time_index.path == "/p/00000000000000000042.timeindex"


def test_append_indexes_and_reads_whole_batch_containing_offset():
    fs = MemoryFileSystem()
    seg = _segment(fs)
    seg.create()
    batches = [_batch(i * 3, n=3, ts=1000 + i * 10) for i in range(10)]
    for b in batches:
        seg.append(b)
    assert seg.next_offset() == 30
    assert len(seg.offset_index) > 0
    read = seg.read(16, max_bytes=1)  # mid-batch offset, min_one_message
    assert read is not None and read.records == batches[5]
    read = seg.read(16, max_bytes=1, min_one_message=False)
    assert read is not None and read.records == batches[5][:1]  # Kafka slices max_bytes
    read = seg.read(0, max_bytes=10**6, max_position=len(batches[0]) * 2)
    assert read is not None and read.records == batches[0] + batches[1]
    assert seg.read(30, 100) is None
    cut = seg.read(0, max_bytes=len(batches[0]) + 5)
    assert cut is not None and len(cut.records) == len(batches[0]) + 5  # partial tail, as Kafka


def test_recover_truncates_torn_tail_and_rebuilds_indexes():
    fs = MemoryFileSystem()
    seg = _segment(fs)
    seg.create()
    for i in range(5):
        seg.append(_batch(i, ts=1000 + i))
    entries = seg.offset_index.entries()
    fs.append(seg.log_path, _batch(5)[:30])
    reopened = _segment(fs)
    reopened.load()
    headers, truncated = reopened.recover()
    assert truncated == 30 and len(headers) == 5
    assert reopened.next_offset() == 5
    assert reopened.offset_index.entries() == entries
    assert reopened.largest_timestamp == 1004


def test_recover_stops_at_bad_crc():
    fs = MemoryFileSystem()
    seg = _segment(fs)
    seg.create()
    seg.append(_batch(0))
    bad = bytearray(_batch(1))
    bad[-1] ^= 0xFF
    fs.append(seg.log_path, bytes(bad))
    headers, truncated = _segment(fs).recover()
    assert len(headers) == 1 and truncated == len(bad)


def test_truncate_to_removes_batch_containing_offset():
    fs = MemoryFileSystem()
    seg = _segment(fs)
    seg.create()
    for i in range(4):
        seg.append(_batch(i * 2, n=2))
    assert seg.truncate_to(5) == 4
    assert seg.next_offset() == 4
    assert [h.base_offset for _, h in iter_batches(fs.read(seg.log_path, 0, 10**6))] == [0, 2]
    assert seg.truncate_to(100) == 4


def test_find_offset_by_timestamp_and_load_keeps_largest_timestamp():
    fs = MemoryFileSystem()
    seg = _segment(fs)
    seg.create()
    for i in range(6):
        seg.append(_batch(i, ts=1000 + 100 * i))
    found = seg.find_offset_by_timestamp(1250)
    assert found is not None and found[1] == 3
    seg.close()
    again = _segment(fs)
    assert again.load()
    assert again.largest_timestamp == 1500
    assert again.next_offset() == 6


def test_scanning_large_batches_reads_headers_only_and_finds_every_batch():
    fs = MemoryFileSystem()
    seg = _segment(fs, interval=4096)
    seg.create()
    batches = [_batch(i * 2, n=2, value=bytes([i]) * 9000) for i in range(12)]
    for b in batches:
        seg.append(b)
    assert [h.base_offset for _, h in seg.batches()] == [i * 2 for i in range(12)]
    for offset in range(24):
        read = seg.read(offset, max_bytes=1)
        assert read is not None and read.records == batches[offset // 2]
    headers, truncated = _segment(fs, interval=4096).recover()
    assert len(headers) == 12 and truncated == 0


def _found_everywhere(seg, upto):
    return [(o, seg.find_batch(o)) for o in range(-1, upto + 2)]


def _located_everywhere(seg, upto):
    return [(o, seg.locate(o)) for o in range(-1, upto + 2)]


def test_reads_at_the_tail_find_the_same_batches_as_a_scan_from_the_index():
    """The positions (and last offsets and sizes) of the last appended batches, kept for
    readers of the tail, give the answers a segment without them (reopened) gives, through gaps, multi-batch appends,
    more batches than it remembers and truncations."""
    fs = MemoryFileSystem()
    seg = _segment(fs, interval=300)
    seg.create()
    offset = 0
    for i in range(60):
        if i % 7 == 3:
            offset += 5  # a gap (a compacted source)
        value = b"v" * (20 + i)  # batch sizes all differ: a stale position is no batch start
        batches = ([_batch(offset, n=2, value=value), _batch(offset + 2, n=1, value=value)] if i % 5 == 0
                   else [_batch(offset, n=3, value=value)])
        seg.append(b"".join(batches))
        offset = offset + 3
        if i in (25, 41):
            offset = seg.truncate_to(offset - 4)
        reopened = _segment(fs, interval=300)
        assert reopened.load()
        assert _found_everywhere(seg, offset) == _found_everywhere(reopened, offset), i
        # ... and so does `locate`, from the remembered tail batches alone where they cover
        assert _located_everywhere(seg, offset) == _located_everywhere(reopened, offset), i


def test_index_entries_written_behind_move_with_a_renamed_segment():
    """The cleaner's swap renames a segment's files: entries not yet written go with them."""
    fs = MemoryFileSystem()
    seg = _segment(fs)
    seg.create()
    for i in range(10):
        seg.append(_batch(i * 3, n=3, ts=1000 + i * 10))
    entries = seg.offset_index.entries()
    assert entries and fs.size(seg.offset_index.path) == 0
    seg.change_file_suffix(".swap")
    assert fs.size(seg.offset_index.path) == 8 * len(entries)
    seg.change_file_suffix("")
    reopened = LogSegment(fs, "/p", 0, index_interval_bytes=100, max_index_size=1024, created_ms=0)
    reopened.load()
    assert reopened.offset_index.entries() == entries
