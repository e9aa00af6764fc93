"""One log segment: `<base>.log` with its `.index`, `.timeindex` and `.txnindex` (Kafka `LogSegment`).

The `.log` file holds record batches exactly as stored (v2 batches, offsets assigned).
Invariants: batches are in increasing offset order, every batch's base offset is >= the
segment's base offset, and offsets fit the indexes' int32 relative form.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from kmirror.log.fs import Buffer, FileSystem, join
from kmirror.log.offset_index import OffsetIndex
from kmirror.log.time_index import NO_TIMESTAMP, TimeIndex
from kmirror.log.transaction_index import AbortedTxn, CompletedTxn, TransactionIndex, TxnIndexSearchResult
from kmirror.records.batch import (
    RECORD_BATCH_OVERHEAD,
    BatchHeader,
    CorruptRecordError,
    crc_ok,
    iter_batches,
    read_header,
)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
_INT32_MAX = 2**31 - 1
# Headers are read in chunks this large while scanning (a whole batch is never read to scan).
_SCAN_CHUNK = 64 * 1024
# How many of the last appended batches a segment remembers the position of.
_TAIL_BATCHES = 16


def filename_prefix(offset: int) -> str:
    """Kafka names segment files by base offset, zero-padded to 20 digits."""
    return f"{offset:020d}"


@dataclass(frozen=True, slots=True)
class SegmentRead:
    records: bytes
    position: int


class LogSegment:
    def __init__(self, fs: FileSystem, directory: str, base_offset: int, *, index_interval_bytes: int,
                 max_index_size: int, created_ms: int, file_suffix: str = "") -> None:
        """`file_suffix` names a segment being built beside the log (the cleaner's
        `.cleaned`, then `.swap`); `change_file_suffix` renames its files."""
        self.fs = fs
        self.base_offset = base_offset
        self.directory = directory
        self.file_suffix = file_suffix
        prefix = join(directory, filename_prefix(base_offset))
        self.log_path = prefix + LOG_SUFFIX + file_suffix
        self.offset_index = OffsetIndex(fs, prefix + INDEX_SUFFIX + file_suffix, base_offset, max_index_size)
        self.time_index = TimeIndex(fs, prefix + TIME_INDEX_SUFFIX + file_suffix, base_offset, max_index_size)
        self.txn_index = TransactionIndex(fs, prefix + TXN_INDEX_SUFFIX + file_suffix, base_offset)
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.size = 0
        self._next_offset: int | None = None
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = base_offset
        self.rolling_based_timestamp: int | None = None
        self._bytes_since_last_index_entry = 0
        # The base offsets and positions of the last batches appended (at most 2 *
        # _TAIL_BATCHES), contiguous up to the end of the file: a read at the tail (a consumer
        # or a mirror that keeps up) starts at its batch instead of scanning headers from
        # the index entry below it. Forgotten whenever the file changes otherwise.
        self._tail_offsets = array("q")
        self._tail_positions = array("q")
        self._tail_lasts = array("q")  # ... and their last offsets and sizes
        self._tail_sizes = array("q")

    # -- lifecycle --------------------------------------------------------------------------

    def create(self) -> None:
        self._forget_tail()
        self.fs.write_file(self.log_path, b"")
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self._next_offset = self.base_offset

    def load(self) -> bool:
        """Open an existing segment trusting its indexes; False if an index needs a rebuild
        (then call `recover`)."""
        self._forget_tail()
        self.size = self.fs.size(self.log_path)
        ok = self.offset_index.load() & self.time_index.load() & self.txn_index.load()
        if ok and len(self.offset_index) and self.offset_index.entries()[-1][1] >= max(self.size, 1):
            ok = False
        ts, offset = self.time_index.last_entry
        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far = ts, offset
        self._next_offset = None
        return ok

    def recover(self) -> tuple[list[BatchHeader], int]:
        """Walk every batch, truncate at the first torn, malformed or bad-CRC one and rebuild
        both indexes (Kafka `LogSegment.recover`). Returns (valid headers, truncated bytes).
        The transaction index is emptied: rebuilding it needs the producer state at the
        segment's start, which the loader has (`update_txn_index`)."""
        self._forget_tail()
        self.size = self.fs.size(self.log_path)
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = self.base_offset
        self.rolling_based_timestamp = None
        self._bytes_since_last_index_entry = 0
        headers: list[BatchHeader] = []
        position = 0
        expected_offset = self.base_offset
        while position < self.size:
            header = self._header_at(position)
            if (header is None or position + header.size > self.size
                    or header.base_offset < expected_offset
                    or header.last_offset - self.base_offset > _INT32_MAX
                    or not crc_ok(self.fs.read(self.log_path, position, header.size), 0, header)):
                break
            self._index_batch(header.last_offset, header.max_timestamp, header.size, position)
            headers.append(header)
            expected_offset = header.next_offset
            position += header.size
        truncated = self.size - position
        if truncated:
            self.fs.truncate(self.log_path, position)
            self.size = position
        self._next_offset = expected_offset
        return headers, truncated

    # -- append -----------------------------------------------------------------------------

    def append(self, records: Buffer, located: Sequence[tuple[int, int, int, int]] | None = None) -> int:
        """Append whole batches whose offsets are assigned; returns the file position.
        `located`: each batch's (base offset, last offset, max timestamp, size), in order,
        when the caller already knows them (the log cleaner), else the headers are read."""
        if located is None:
            located = [(h.base_offset, h.last_offset, h.max_timestamp, h.size) for _, h in iter_batches(records)]
        if not located:
            return self.size
        if located[0][0] < self.next_offset():
            raise ValueError(f"{self.log_path}: offset {located[0][0]} below {self.next_offset()}")
        if located[-1][1] - self.base_offset > _INT32_MAX:
            raise ValueError(f"{self.log_path}: offset {located[-1][1]} not relative-addressable")
        position = self.fs.append(self.log_path, records)
        if position != self.size:
            raise RuntimeError(f"{self.log_path}: appended at {position}, expected {self.size}")
        tail_offsets, tail_positions = self._tail_offsets, self._tail_positions
        tail_lasts, tail_sizes = self._tail_lasts, self._tail_sizes
        for base_offset, last_offset, max_timestamp, size in located:
            self._index_batch(last_offset, max_timestamp, size, position)
            tail_offsets.append(base_offset)
            tail_positions.append(position)
            tail_lasts.append(last_offset)
            tail_sizes.append(size)
            position += size
        if len(tail_offsets) > 2 * _TAIL_BATCHES:
            for remembered in (tail_offsets, tail_positions, tail_lasts, tail_sizes):
                del remembered[:-_TAIL_BATCHES]
        self.size = position
        self._next_offset = located[-1][1] + 1
        return position

    def _index_batch(self, last_offset: int, max_timestamp: int, size: int, position: int) -> None:
        # Kafka LogSegment.append: an index entry (batch last offset -> batch position) once
        # more than index.interval.bytes were appended since the previous entry.
        if self.rolling_based_timestamp is None:
            self.rolling_based_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = max_timestamp
            self.offset_of_max_timestamp_so_far = last_offset
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            if not self.offset_index.is_full:
                self.offset_index.append(last_offset, position)
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += size
        self.size = max(self.size, position + size)

    # -- read -------------------------------------------------------------------------------

    def batches(self, start_position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from `start_position`, reading headers only."""
        position = start_position
        buffer = b""
        buffer_start = position
        last_size = 0
        while position < self.size:
            offset_in_buffer = position - buffer_start
            if offset_in_buffer + RECORD_BATCH_OVERHEAD > len(buffer):
                # Small batches: read many headers at once; large ones: read just the header.
                chunk = RECORD_BATCH_OVERHEAD if last_size > _SCAN_CHUNK // 8 else _SCAN_CHUNK
                buffer_start = position
                buffer = self.fs.read(self.log_path, position, min(chunk, self.size - position))
                offset_in_buffer = 0
            try:
                header = read_header(buffer, offset_in_buffer)
            except CorruptRecordError:
                return
            yield position, header
            last_size = header.size
            position += header.size

    def find_batch(self, offset: int, start_position: int = 0) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset is >= `offset` (the one containing it, or the
        next one after a gap), scanning from the last remembered batch that starts at or
        below `offset`, else from the index's floor entry."""
        tail = self._tail_offsets
        if tail and tail[0] <= offset:
            # Every batch before it ends below `offset`, and it is at or past the index floor
            # (the remembered batches run to the end of the file).
            start = self._tail_positions[bisect_right(tail, offset) - 1]
        else:
            _, start = self.offset_index.lookup(offset)
        for position, header in self.batches(max(start, start_position)):
            if header.last_offset >= offset:
                return position, header
        return None

    def locate(self, offset: int) -> tuple[int, int, int, int] | None:
        """(position, base offset, last offset, size) of the first batch whose last offset is
        >= `offset`, as `find_batch`; from memory when the remembered tail batches cover
        `offset` (a consumer or a mirror that keeps up reads there), without reading a header."""
        tail = self._tail_offsets
        if tail and tail[0] <= offset:
            # The remembered batches run to the end of the file: past the last one, none.
            i = bisect_right(tail, offset) - 1
            if self._tail_lasts[i] < offset:
                i += 1  # `offset` is in a gap: the next batch
            if i == len(tail):
                return None
            return self._tail_positions[i], tail[i], self._tail_lasts[i], self._tail_sizes[i]
        found = self.find_batch(offset)
        if found is None:
            return None
        position, header = found
        return position, header.base_offset, header.last_offset, header.size

    def read(self, start_offset: int, max_bytes: int, max_position: int | None = None,
             min_one_message: bool = True) -> SegmentRead | None:
        """Bytes from the batch containing `start_offset` (Kafka returns the whole batch for
        a mid-batch fetch offset), at most `max_bytes` unless `min_one_message` lets the first
        batch exceed it; never past `max_position`. The result may end in a partial batch, as
        Kafka's does; None when no batch at or after `start_offset` exists."""
        found = self.locate(start_offset)
        if found is None:
            return None
        position, _, _, batch_size = found
        limit = self.size if max_position is None else min(max_position, self.size)
        if position >= limit:
            return None
        size = max(max_bytes, batch_size) if min_one_message else max_bytes
        size = min(size, limit - position)
        if size <= 0:
            return SegmentRead(b"", position)
        return SegmentRead(self.fs.read_range(self.log_path, position, size), position)

    def read_header_at(self, position: int) -> BatchHeader | None:
        return self._header_at(position)

    def _header_at(self, position: int) -> BatchHeader | None:
        raw = self.fs.read(self.log_path, position, RECORD_BATCH_OVERHEAD)
        try:
            return read_header(raw)
        except CorruptRecordError:
            return None

    def next_offset(self) -> int:
        """The offset after the last batch (the base offset when empty)."""
        if self._next_offset is None:
            _, position = self.offset_index.lookup(2**63 - 1)
            next_offset = self.base_offset
            for _, header in self.batches(position):
                next_offset = header.next_offset
            self._next_offset = next_offset
        return self._next_offset

    def find_offset_by_timestamp(self, timestamp: int) -> tuple[int, int, BatchHeader] | None:
        """First batch with max timestamp >= `timestamp`: (position, offset, header), where
        offset is the batch's base offset (records inside are not decoded here)."""
        _, start_offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(start_offset)
        for pos, header in self.batches(position):
            if header.max_timestamp >= timestamp and header.last_offset >= start_offset:
                return pos, max(header.base_offset, start_offset), header
        return None

    # -- transactions ---------------------------------------------------------------------

    def update_txn_index(self, completed: CompletedTxn, last_stable_offset: int) -> None:
        """Kafka `LogSegment.updateTxnIndex`: an aborted transaction whose marker was just
        appended to this segment is indexed here (committed ones are not)."""
        if completed.is_aborted:
            self.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                             completed.last_offset, last_stable_offset))

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    # -- truncation, roll, flush -------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= `offset`; returns the new end offset
        (the base offset of a batch that straddled `offset`, else `offset` capped by the end)."""
        found = self.find_batch(offset)
        old_next = self.next_offset()
        if found is None:
            return min(offset, old_next)
        position, header = found
        self._forget_tail()
        self.offset_index.truncate_to(header.base_offset)
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to(header.base_offset)
        self.txn_index.truncate_to(header.base_offset)
        self.fs.truncate(self.log_path, position)
        self.size = position
        self.rescan_state()
        return min(offset, header.base_offset)

    def rescan_state(self) -> None:
        """Recompute the max timestamp and next offset after a truncation."""
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = self.base_offset
        self.rolling_based_timestamp = None
        next_offset = self.base_offset
        for _, header in self.batches(0):
            if self.rolling_based_timestamp is None:
                self.rolling_based_timestamp = header.max_timestamp
            if header.max_timestamp > self.max_timestamp_so_far:
                self.max_timestamp_so_far = header.max_timestamp
                self.offset_of_max_timestamp_so_far = header.last_offset
            next_offset = header.next_offset
        self._next_offset = next_offset
        self._bytes_since_last_index_entry = 0

    def _forget_tail(self) -> None:
        for remembered in (self._tail_offsets, self._tail_positions, self._tail_lasts, self._tail_sizes):
            del remembered[:]

    def on_become_inactive(self) -> None:
        """At roll (and close) the time index gets a final entry for the max timestamp, so a
        reopened segment knows its largest timestamp without a scan (Kafka does the same).
        The positions of its last batches are forgotten: they serve readers of the tail."""
        self._forget_tail()
        if self.max_timestamp_so_far != NO_TIMESTAMP:
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)

    @property
    def largest_timestamp(self) -> int:
        return self.max_timestamp_so_far

    def flush(self) -> None:
        self.fs.fsync(self.log_path)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        self.on_become_inactive()
        self.offset_index.close()
        self.time_index.close()
        for path in (self.log_path, self.txn_index.path):
            self.fs.close(path)

    def delete(self) -> None:
        self._forget_tail()
        self.offset_index.discard_unwritten()
        self.time_index.discard_unwritten()
        for path in (self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path):
            self.fs.close(path)
            self.fs.delete(path)

    def change_file_suffix(self, new_suffix: str) -> None:
        """Rename every file of the segment to end in `new_suffix` instead of its current
        suffix (Kafka `LogSegment.changeFileSuffixes`): the indexes first, the `.log` last,
        so the `.log` name marks a complete rename."""
        for source, target in self.file_suffix_moves(new_suffix):
            self.fs.rename(source, target)
        self.set_file_suffix(new_suffix)

    def file_suffix_moves(self, new_suffix: str) -> list[tuple[str, str]]:
        """The (path, new path) renames of `change_file_suffix`, in its order, for a caller
        that renames the files of several segments at once (`FileSystem.rename_all`); then
        `set_file_suffix`."""
        self.offset_index.write_out()
        self.time_index.write_out()
        prefix = join(self.directory, filename_prefix(self.base_offset))
        moves = [(index.path, prefix + suffix + new_suffix)
                 for index, suffix in ((self.offset_index, INDEX_SUFFIX), (self.time_index, TIME_INDEX_SUFFIX),
                                       (self.txn_index, TXN_INDEX_SUFFIX))
                 if self.fs.exists(index.path)]
        moves.append((self.log_path, prefix + LOG_SUFFIX + new_suffix))
        return moves

    def set_file_suffix(self, new_suffix: str) -> None:
        prefix = join(self.directory, filename_prefix(self.base_offset))
        self.offset_index.path = prefix + INDEX_SUFFIX + new_suffix
        self.time_index.path = prefix + TIME_INDEX_SUFFIX + new_suffix
        self.txn_index.path = prefix + TXN_INDEX_SUFFIX + new_suffix
        self.log_path = prefix + LOG_SUFFIX + new_suffix
        self.file_suffix = new_suffix

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Kafka: measured from the first batch's timestamp when known, else creation time."""
        if self.rolling_based_timestamp is not None and self.rolling_based_timestamp >= 0:
            return message_timestamp - self.rolling_based_timestamp
        return now_ms - self.created_ms

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"
