"""The transaction index (`.txnindex`): Kafka's on-disk format, filled when an ABORT marker
is appended (leader or replicated), searched for read_committed fetches, truncated and
deleted with the log, rebuilt on recovery."""

import pytest

from kmirror.log.append_analysis import AppendOrigin
from kmirror.log.config import LogConfig
from kmirror.log.log import Log
from kmirror.log.outcomes import LogAppendInfo
from kmirror.log.transaction_index import AbortedTxn, TransactionIndex
from kmirror.ports import ManualClock
from kmirror.records.builder import build_batch
from kmirror.records.control import ControlType, build_control_batch
from kmirror.replication.log_port import fetched_upper_bound_offset
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.types import TopicPartition

TP = TopicPartition("t", 0)
NOW = 1_700_000_000_000
DIR = "/data/t-0"


def _open(fs, config=None, **kw):
    return Log.open(fs, DIR, TP, config or LogConfig(), ManualClock(NOW), **kw)


def _txn_data(offset, pid, seq=0, n=1):
    return build_batch([(None, b"v%d" % i, (), NOW) for i in range(n)], base_offset=offset, producer_id=pid,
                       producer_epoch=0, base_sequence=seq, is_transactional=True, partition_leader_epoch=0)


def _plain(offset, n=1):
    return build_batch([(None, b"p", (), NOW)] * n, base_offset=offset, partition_leader_epoch=0)


def _marker(kind, offset, pid):
    return build_control_batch(kind, pid, 0, NOW, base_offset=offset, partition_leader_epoch=0)


def _txnindex_files(fs):
    return sorted(n for n in fs.listdir(DIR) if n.endswith(".txnindex"))


def _interleaved(log):
    """pid 1 aborts [0, 4], pid 2 commits [1, 5], pid 3 aborts [6, 7] alone."""
    for batch in (_txn_data(0, 1, n=1), _txn_data(1, 2, n=1), _plain(2), _txn_data(3, 1, seq=1),
                  _marker(ControlType.ABORT, 4, 1), _marker(ControlType.COMMIT, 5, 2),
                  _txn_data(6, 3), _marker(ControlType.ABORT, 7, 3)):
        assert isinstance(log.append_as_follower(batch), LogAppendInfo)


def test_entry_is_kafkas_34_byte_format():
    fs = MemoryFileSystem()
    index = TransactionIndex(fs, "/x.txnindex", 0)
    assert not fs.exists("/x.txnindex")  # created with the first entry only
    index.append(AbortedTxn(producer_id=0x0102030405060708, first_offset=5, last_offset=9, last_stable_offset=10))
    raw = fs.read("/x.txnindex", 0, 1000)
    assert raw == (b"\x00\x00" + bytes.fromhex("0102030405060708") + (5).to_bytes(8, "big")
                   + (9).to_bytes(8, "big") + (10).to_bytes(8, "big"))
    assert len(raw) == 34
    again = TransactionIndex(fs, "/x.txnindex", 0)
    assert again.load() and again.entries() == index.entries()


def test_markers_must_not_go_backwards_and_a_bad_file_fails_the_sanity_check():
    fs = MemoryFileSystem()
    index = TransactionIndex(fs, "/x.txnindex", 0)
    index.append(AbortedTxn(1, 0, 9, 10))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(2, 0, 8, 10))
    fs.append("/x.txnindex", b"\x00")
    assert not TransactionIndex(fs, "/x.txnindex", 0).load()
    fs.write_file("/y.txnindex", b"\x00\x01" + bytes(32))  # unknown version
    assert not TransactionIndex(fs, "/y.txnindex", 0).load()
    missing = TransactionIndex(fs, "/none.txnindex", 0)
    assert missing.load() and len(missing) == 0


def test_abort_markers_are_indexed_with_the_lso_and_commits_are_not():
    fs = MemoryFileSystem()
    log = _open(fs)
    _interleaved(log)
    # When pid 1 aborted at 4, pid 2's transaction (from 1) was still open: LSO 1.
    assert log.active_segment.txn_index.entries() == [AbortedTxn(1, 0, 4, 1), AbortedTxn(3, 6, 7, 8)]
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 8


def test_collect_returns_the_aborted_transactions_overlapping_the_range():
    log = _open(MemoryFileSystem())
    _interleaved(log)
    assert log.collect_aborted_transactions(0, 8) == [AbortedTxn(1, 0, 4, 1), AbortedTxn(3, 6, 7, 8)]
    assert log.collect_aborted_transactions(5, 8) == [AbortedTxn(3, 6, 7, 8)]  # pid 1 ended before 5
    assert log.collect_aborted_transactions(0, 4) == [AbortedTxn(1, 0, 4, 1)]  # pid 3 starts at 6
    assert log.collect_aborted_transactions(8, 9) == []


def test_a_transaction_aborted_in_a_later_segment_is_found_from_the_earlier_one():
    log = _open(MemoryFileSystem(), config=LogConfig(segment_bytes=200))
    offset = 0
    for batch in (_txn_data(0, 1), _plain(1), _plain(2), _plain(3)):
        log.append_as_follower(batch)
        offset += 1
    log.append_as_follower(_marker(ControlType.ABORT, 4, 1))
    assert len(log.segments) > 1
    marker_segment = [s for s in log.segments if len(s.txn_index)]
    assert [s.base_offset for s in marker_segment] == [log.segments[-1].base_offset]
    assert log.collect_aborted_transactions(0, 2) == [AbortedTxn(1, 0, 4, 5)]


def test_leader_appends_index_aborts_too():
    log = _open(MemoryFileSystem())
    data = build_batch([(None, b"v", (), NOW)], producer_id=4, producer_epoch=0, base_sequence=0,
                       is_transactional=True)
    assert isinstance(log.append_as_leader(data, 0), LogAppendInfo)
    abort = build_control_batch(ControlType.ABORT, 4, 0, NOW)
    assert isinstance(log.append_as_leader(abort, 0, origin=AppendOrigin.COORDINATOR), LogAppendInfo)
    assert log.active_segment.txn_index.entries() == [AbortedTxn(4, 0, 1, 2)]


def test_truncation_removes_entries_at_and_after_the_cut_and_segment_deletion_removes_the_file():
    fs = MemoryFileSystem()
    log = _open(fs)
    _interleaved(log)
    log.truncate_to(7)
    assert log.active_segment.txn_index.entries() == [AbortedTxn(1, 0, 4, 1)]
    assert fs.size(f"{DIR}/{0:020d}.txnindex") == 34
    log.truncate_to(4)
    assert log.active_segment.txn_index.entries() == []
    assert fs.size(f"{DIR}/{0:020d}.txnindex") == 0
    log.truncate_fully_and_start_at(100)
    assert _txnindex_files(fs) == []


def test_retention_deletes_the_txnindex_with_its_segment():
    fs = MemoryFileSystem()
    log = _open(fs, config=LogConfig(segment_bytes=150))
    _interleaved(log)
    files_before = _txnindex_files(fs)
    assert files_before
    log.update_high_watermark(log.log_end_offset)
    log.maybe_increment_log_start_offset(log.log_end_offset)
    remaining = {f"{s.base_offset:020d}.txnindex" for s in log.segments}
    assert set(_txnindex_files(fs)) <= remaining
    assert set(files_before) - remaining and not (set(files_before) - remaining) & set(_txnindex_files(fs))


def test_clean_reopen_loads_the_index_and_unclean_reopen_rebuilds_it_byte_identical():
    fs = MemoryFileSystem()
    config = LogConfig(segment_bytes=150)
    log = _open(fs, config)
    _interleaved(log)
    original = {n: fs.read(f"{DIR}/{n}", 0, 10_000) for n in _txnindex_files(fs)}
    expected = [(s.base_offset, s.txn_index.entries()) for s in log.segments]
    log.close()
    reopened = _open(fs, config, recovery_point=8)
    assert [(s.base_offset, s.txn_index.entries()) for s in reopened.segments] == expected
    # Unclean: nothing trusted (recovery point 0) and every index file lost.
    for name in original:
        fs.delete(f"{DIR}/{name}")
    recovered = _open(fs, config, recovery_point=0)
    assert [(s.base_offset, s.txn_index.entries()) for s in recovered.segments] == expected
    assert {n: fs.read(f"{DIR}/{n}", 0, 10_000) for n in _txnindex_files(fs)} == original


def test_a_corrupt_txnindex_is_rebuilt_even_below_the_recovery_point():
    fs = MemoryFileSystem()
    log = _open(fs)
    _interleaved(log)
    expected = log.active_segment.txn_index.entries()
    log.close()
    fs.append(f"{DIR}/{0:020d}.txnindex", b"junk")
    reopened = _open(fs, recovery_point=8)
    assert reopened.active_segment.txn_index.entries() == expected


def test_an_orphan_txnindex_is_removed_on_load():
    fs = MemoryFileSystem()
    _open(fs).close()
    fs.write_file(f"{DIR}/{500:020d}.txnindex", bytes(34))
    _open(fs)
    assert _txnindex_files(fs) == []


def test_fetched_upper_bound_covers_a_trailing_partial_batch():
    data = _plain(10, n=2) + _plain(12, n=3)
    assert fetched_upper_bound_offset(data, 10) == 15
    assert fetched_upper_bound_offset(data[:-5], 10) == 15  # header of the partial batch readable
    assert fetched_upper_bound_offset(data[: len(_plain(10, n=2)) + 10], 10) == 12
    assert fetched_upper_bound_offset(b"", 10) == 10


def test_partition_read_committed_lists_aborted_transactions_and_stops_at_the_lso():
    from uuid import uuid4

    from kmirror.records.batch import iter_batches
    from kmirror.replication.outcomes import READ_COMMITTED, READ_UNCOMMITTED, ReadOutcome
    from kmirror.replication.partition import Partition, PartitionState

    log = _open(MemoryFileSystem())
    _interleaved(log)
    log.append_as_follower(_txn_data(8, 5))  # open: the LSO stays at 8
    log.append_as_follower(_plain(9))
    log.update_high_watermark(log.log_end_offset)
    partition = Partition(TP, uuid4(), log, 1, PartitionState(leader=1, leader_epoch=0, partition_epoch=0,
                                                              replicas=(1,), isr=(1,)), 1)
    committed = partition.read(0, 1 << 20, READ_COMMITTED, -1, True)
    assert isinstance(committed, ReadOutcome)
    assert committed.aborted_transactions == ((1, 0), (3, 6))
    assert committed.last_stable_offset == 8
    assert max(h.last_offset for _, h in iter_batches(committed.records)) == 7
    from_five = partition.read(5, 1 << 20, READ_COMMITTED, -1, True)
    assert isinstance(from_five, ReadOutcome) and from_five.aborted_transactions == ((3, 6),)
    uncommitted = partition.read(0, 1 << 20, READ_UNCOMMITTED, -1, True)
    assert isinstance(uncommitted, ReadOutcome) and uncommitted.aborted_transactions == ()
    assert max(h.last_offset for _, h in iter_batches(uncommitted.records)) == 9


def test_the_indexed_lso_does_not_depend_on_how_batches_were_grouped_into_appends():
    # pid 1 aborts at 1 while nobody else is open; pid 2 starts at 3 in the same append
    # (Kafka, taking the LSO after the whole append, would store 3 there and 2 one by one).
    batches = [_txn_data(0, 1), _marker(ControlType.ABORT, 1, 1), _plain(2), _txn_data(3, 2),
               _marker(ControlType.ABORT, 4, 2), _txn_data(5, 3)]
    one_by_one, at_once = _open(MemoryFileSystem()), _open(MemoryFileSystem())
    for batch in batches:
        one_by_one.append_as_follower(batch)
    at_once.append_as_follower(b"".join(batches))
    expected = [AbortedTxn(1, 0, 1, 2), AbortedTxn(2, 3, 4, 5)]
    assert one_by_one.active_segment.txn_index.entries() == at_once.active_segment.txn_index.entries() == expected
