"""One cleaning round over one log (Kafka `Cleaner.doClean`), as a generator of work steps.

1. Offset map: the dirty section [first dirty offset, first uncleanable offset) is read
   and each key's latest offset recorded (aborted transactional data and control batches
   skipped), until the map's memory budget is spent; the round then ends at the last batch
   mapped (`end_offset`). What the pass learnt of each mapped batch (record ends, offset
   deltas, key map entries) is kept, bounded, for step 2 (`record_memo`).
2. Every segment from the log start up to `end_offset` is rewritten, in groups no larger
   than one segment (`segment.bytes`, `segment.index.bytes`), into a cleaned segment
   (`batch_rewrite` says how each batch is kept) carrying the group's first base offset; a
   batch noted in step 1 is decided from its notes, without walking or hashing it again.
3. Each group is swapped in (`swap`); the caller then checkpoints `end_offset` as the
   next first dirty offset, and, with `defer_deletes`, deletes the replaced segments
   (`replaced`, renamed `.deleted`) after `file.delete.delay.ms`.

`run()` yields the bytes processed after each step of at most `step_bytes`, so a shell can
interleave other work, throttle I/O, or stop (closing the generator removes the partial
`.cleaned` files). Between steps the log may change under the round (appends, retention,
truncation): the swap checks that the group's segments are still the log's, unchanged,
and otherwise abandons the round (`CleaningAborted`), as Kafka aborts a cleaning that a
truncation or deletion overtook.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field

import numpy as np
from crc32c import crc32c

from kmirror.log.cleaner.batch_rewrite import empty_batch, rebuild_batch, records_of
from kmirror.log.cleaner.offset_map import MAP_FULL, REACHED_END, OffsetMap, map_chunk, put_batch
from kmirror.log.cleaner.record_filter import (
    ERROR,
    HORIZON_SET,
    INVALID,
    READ,
    STATS,
    WRITTEN,
    decide,
    decide_noted,
    filter_chunk,
    noted,
    noted_fields,
    write_kept,
)
from kmirror.log.cleaner.record_memo import RecordMemo
from kmirror.log.cleaner.segment_reader import Chunk, iter_chunks
from kmirror.log.cleaner.swap import CleaningAborted, new_cleaned_segment, replace_segments
from kmirror.log.cleaner.transactions import CleanedTransactionMetadata
from kmirror.log.log import Log
from kmirror.log.segment import LogSegment
from kmirror.records.batch import RECORD_BATCH_OVERHEAD, BatchHeader
from kmirror.records.control import ControlType, read_control_type
from kmirror.records.record import InvalidRecordError
from kmirror.records.record_scan import FIELDS, scan_section
from kmirror.records.record_walk import ERRORS

_INT32_MAX = 2**31 - 1
DEFAULT_STEP_BYTES = 64 * 1024
# The cleaned segment is fsynced as it grows, so the swap's final fsync (one step) stays short.
FLUSH_EVERY_BYTES = 4 * 1024 * 1024


@dataclass(slots=True)
class CleanerStats:
    """Kafka `CleanerStats`: what a round read and wrote."""

    map_bytes_read: int = 0
    map_messages_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    invalid_messages: int = 0
    buffer_utilization: float = 0.0
    segments_swapped: int = 0
    groups: list[tuple[int, int]] = field(default_factory=list)  # (base offset, segments)


class DedupeBufferTooSmall(Exception):
    """Not even one batch of the dirty section fits the key map (Kafka fails the round the
    same way); the partition is marked uncleanable."""


@dataclass(frozen=True, slots=True)
class LastRecord:
    """An active producer's last data offset (None when its last batch is a marker) and
    epoch (Kafka `LastRecord`)."""

    last_data_offset: int | None
    producer_epoch: int


class LogCleaning:
    def __init__(self, log: Log, first_dirty_offset: int, first_uncleanable_offset: int, now_ms: int,
                 offset_map: OffsetMap, *, io_buffer_size: int = 512 * 1024,
                 step_bytes: int = DEFAULT_STEP_BYTES, memo_bytes: int | None = None,
                 defer_deletes: bool = False) -> None:
        self.log = log
        self.first_dirty_offset = first_dirty_offset
        self.first_uncleanable_offset = first_uncleanable_offset
        self.now_ms = now_ms
        self.map = offset_map
        self.io_buffer_size = io_buffer_size
        self.step_bytes = step_bytes
        self.end_offset = first_dirty_offset
        self.stats = CleanerStats()
        self.latest_delete_horizon_ms: int | None = None
        self.done = False
        # With `defer_deletes`, the replaced segments, renamed `.deleted`, for the caller to
        # delete after `file.delete.delay.ms` (Kafka `LocalLog.replaceSegments`'s async delete)
        self.defer_deletes = defer_deletes
        self.replaced: list[LogSegment] = []
        self._scratch = _Scratch()
        # What the key-map pass notes for the filter pass: a quarter of the map's budget by default
        self.memo = RecordMemo(offset_map.capacity_bytes // 4 if memo_bytes is None else memo_bytes)

    # -- the round --------------------------------------------------------------------------

    def run(self) -> Generator[int, None, None]:
        self.map.clear()
        self.memo.clear()
        yield from self._build_offset_map()
        self.memo.cursor[0] = 0
        if self.map.latest_offset < self.first_dirty_offset < self.first_uncleanable_offset:
            raise DedupeBufferTooSmall(
                f"{self.log.topic_partition}: the key map ({self.map.capacity_bytes} bytes) cannot hold the keys "
                f"of the batch at offset {self.first_dirty_offset}; raise log.cleaner.dedupe.buffer.size")
        self.end_offset = max(self.map.latest_offset + 1, self.first_dirty_offset)
        self.map.update_latest_offset(self.end_offset - 1)
        self.stats.buffer_utilization = self.map.utilization
        log = self.log
        segments = [s for s in log.segments[:-1] if s.base_offset < self.end_offset]
        transactions = CleanedTransactionMetadata(
            log.collect_aborted_transactions(log.log_start_offset, self.end_offset))
        last_records = self._last_records_of_active_producers()
        for group in group_segments_by_size(segments, min(log.config.segment_bytes, _INT32_MAX),
                                            log.config.segment_index_bytes, self.end_offset):
            yield from self._clean_group(group, transactions, last_records)
        self.done = True

    # -- 1. the offset map ------------------------------------------------------------------

    def _build_offset_map(self) -> Iterator[int]:
        start, end = self.first_dirty_offset, self.first_uncleanable_offset
        log = self.log
        transactions = CleanedTransactionMetadata(log.collect_aborted_transactions(start, end))
        pending = 0
        for segment in _segments_between(log, start, end):
            _, position = segment.offset_index.lookup(start)
            for chunk in iter_chunks(segment, position, self.io_buffer_size, self._checker(segment)):
                more = (self._map_plain_chunk(chunk, start, end) if chunk.all_plain
                        else self._map_chunk_per_batch(chunk, transactions, start, end))
                self.stats.map_bytes_read += chunk.size
                pending += chunk.size
                if not more:
                    return
                if pending >= self.step_bytes:
                    yield pending
                    pending = 0
        if pending:
            yield pending

    def _map_plain_chunk(self, chunk: Chunk, start: int, end: int) -> bool:
        """The whole chunk in one compiled call; False when the map is full."""
        offset_map = self.map
        records_in_chunk = chunk.records
        offset_map.reserve(records_in_chunk)
        memo = self.memo
        memo.reserve(chunk.n, records_in_chunk)
        latest = np.array([offset_map.latest_offset], dtype=np.int64)
        outcome, records, error = map_chunk(
            chunk.buf, chunk.headers, chunk.n, start, end, self._scratch.fields_for(chunk.max_records),
            offset_map.slots, offset_map.arena, offset_map.offsets, offset_map.meta, offset_map.undo,
            offset_map.codes, offset_map.hashes, latest, memo.batches, memo.records, memo.used)
        if error:
            raise InvalidRecordError(f"{self.log.topic_partition}: {ERRORS[error]}")
        offset_map.update_latest_offset(int(latest[0]))
        self.stats.map_messages_read += records
        return outcome not in (MAP_FULL, REACHED_END)

    def _map_chunk_per_batch(self, chunk: Chunk, transactions: CleanedTransactionMetadata, start: int,
                             end: int) -> bool:
        for pos, header in chunk.batches():
            if header.base_offset >= end:
                return False
            if header.is_control:
                transactions.on_control_batch_read(header, _control_type(chunk.data, pos, header))
                self.stats.map_messages_read += 1
            elif transactions.on_batch_read(header):
                self.stats.map_messages_read += header.records_count
            elif not self._map_batch(chunk.data, pos, header, start):
                return False
            if header.last_offset >= start:
                self.map.update_latest_offset(header.last_offset)
        return True

    def _map_batch(self, chunk: bytes, pos: int, header: BatchHeader, start: int) -> bool:
        """Put the batch's keys; False when the map is full (the round ends before it). A
        batch is mapped whole or not at all (Kafka stops before the batch that does not fit)."""
        buf, section_start, section_end = self._section(chunk, pos, header)
        count = header.records_count
        fields = self._scratch.fields_for(count)
        m, memo = self.map, self.memo
        m.reserve(count)
        memo.reserve(1, count)
        if not put_batch(m.slots, m.arena, m.offsets, m.meta, m.undo, m.codes, m.hashes, buf, fields, count,
                         header.base_offset, start, section_start, header.size, _signed_crc(header), memo.batches,
                         memo.records, memo.used):
            return False
        self.stats.map_messages_read += count
        return True

    def _section(self, chunk: bytes, pos: int, header: BatchHeader) -> tuple[np.ndarray, int, int]:
        """The batch's records section, scanned into the scratch fields: (buffer, start, end)."""
        buf, section_start, section_end = _records_section(chunk, pos, header)
        fields = self._scratch.fields_for(header.records_count)
        error, _ = scan_section(buf, section_start, section_end, header.records_count, fields, 0)
        if error:
            raise InvalidRecordError(f"{self.log.topic_partition}: batch at offset {header.base_offset}: "
                                     f"{ERRORS[error]}")
        return buf, section_start, section_end

    # -- 2. cleaning a group ----------------------------------------------------------------

    def _clean_group(self, group: list[LogSegment], transactions: CleanedTransactionMetadata,
                     last_records: dict[int, LastRecord]) -> Iterator[int]:
        log = self.log
        sizes = [s.size for s in group]
        cleaned = new_cleaned_segment(log, group[0].base_offset)
        transactions.retained_aborted = []
        producers = _producer_arrays(last_records)
        swapped = False
        try:
            pending = 0
            unflushed = 0
            for segment in group:
                upper_bound = segment.next_offset()
                for chunk in iter_chunks(segment, 0, self.io_buffer_size, self._checker(segment)):
                    located: list[tuple[int, int, int, int]] | None = None
                    if chunk.all_plain:
                        out: bytes | bytearray
                        out, located = self._filter_plain_chunk(chunk, upper_bound, producers)
                    else:
                        out = bytearray()
                        for pos, header in chunk.batches():
                            kept = self._filter_batch(chunk.data, pos, header, transactions, last_records,
                                                      upper_bound)
                            if kept is not None:
                                out += kept
                    if out:
                        cleaned.append(out, located)
                        self.stats.bytes_written += len(out)
                        unflushed += len(out)
                        if unflushed >= FLUSH_EVERY_BYTES:
                            cleaned.flush()
                            unflushed = 0
                    self.stats.bytes_read += chunk.size
                    pending += chunk.size
                    if pending >= self.step_bytes:
                        yield pending
                        pending = 0
            for txn in transactions.retained_aborted:
                cleaned.txn_index.append(txn)
            if pending:
                yield pending
            replace_segments(log, cleaned, group, sizes, defer_deletes=self.defer_deletes)
            swapped = True
            if self.defer_deletes:
                self.replaced.extend(group)
            self.stats.segments_swapped += len(group)
            self.stats.groups.append((group[0].base_offset, len(group)))
        finally:
            if not swapped:
                cleaned.delete()

    def _filter_plain_chunk(self, chunk: Chunk, upper_bound: int, producers: tuple[np.ndarray, np.ndarray]
                            ) -> tuple[bytes, list[tuple[int, int, int, int]]]:
        """The whole chunk in one compiled call (`record_filter.filter_chunk`), then the CRC
        of each rebuilt batch; the bytes to append and where their batches are."""
        scratch = self._scratch
        out = scratch.out_for(chunk.size + 6 * chunk.records)
        stats = np.zeros(STATS, dtype=np.int64)
        crc_positions = scratch.crc_positions_for(chunk.n)
        horizon = self.now_ms + self.log.config.delete_retention_ms
        written = scratch.written_for(chunk.n)
        end, n_crc, n_written = filter_chunk(
            chunk.buf, chunk.headers, chunk.n, upper_bound, self.now_ms, self.map.latest_offset, horizon,
            self.map.slots, self.map.arena, self.map.offsets, producers[0], producers[1],
            scratch.fields_for(chunk.max_records), scratch.keep_for(chunk.max_records), out, crc_positions, written,
            stats, self.memo.batches, self.memo.records, self.memo.used, self.memo.cursor)
        if stats[ERROR]:
            raise InvalidRecordError(f"{self.log.topic_partition}: {ERRORS[int(stats[ERROR])]}")
        self.stats.messages_read += int(stats[READ])
        self.stats.messages_written += int(stats[WRITTEN])
        self.stats.invalid_messages += int(stats[INVALID])
        if stats[HORIZON_SET] and (self.latest_delete_horizon_ms is None or horizon > self.latest_delete_horizon_ms):
            self.latest_delete_horizon_ms = horizon
        view = out.data
        for pos in crc_positions[:n_crc].tolist():
            size = int.from_bytes(view[pos + 8:pos + 12], "big", signed=True) + 12
            view[pos + 17:pos + 21] = crc32c(view[pos + 21:pos + size]).to_bytes(4, "big")
        return out[:end].tobytes(), list(zip(*written[:, :n_written].tolist(), strict=True))

    def _filter_batch(self, chunk: bytes, pos: int, header: BatchHeader,
                      transactions: CleanedTransactionMetadata, last_records: dict[int, LastRecord],
                      upper_bound: int) -> bytes | None:
        """Kafka `Cleaner.cleanInto`'s filter: the batch as kept, or None when dropped."""
        now = self.now_ms
        if header.is_control:
            can_discard = transactions.on_control_batch_read(header, _control_type(chunk, pos, header))
            discard_records = (can_discard and header.has_delete_horizon and header.base_timestamp <= now)
        else:
            can_discard = transactions.on_batch_read(header)
            discard_records = can_discard
        last = last_records.get(header.producer_id) if header.has_producer_id else None
        last_of_producer = last is not None and (
            header.last_offset == last.last_data_offset if last.last_data_offset is not None
            else header.is_control and header.producer_epoch == last.producer_epoch)
        retain_empty = last_of_producer or header.next_offset == upper_bound
        count = header.records_count
        self.stats.messages_read += count
        if discard_records:
            return empty_batch(header) if retain_empty else None
        scratch = self._scratch
        fields, keep = scratch.fields_for(count), scratch.keep_for(count)
        keep_deletes = not header.has_delete_horizon or now < header.base_timestamp
        memo = self.memo
        first = -1 if header.is_control or header.last_offset > self.map.latest_offset else int(noted(
            memo.batches, memo.used, memo.cursor, _signed_crc(header), header.base_offset, header.size, count))
        if first >= 0:  # the key-map pass noted it: no walk, no hashing, no decompression yet
            kept, invalid, tombstones = decide_noted(count, header.base_offset, memo.records, first, self.map.offsets,
                                                     keep_deletes, keep)
        else:
            buf, section_start, section_end = self._section(chunk, pos, header)
            kept, invalid, tombstones = decide(buf, fields, 0, count, header.base_offset, self.map.latest_offset,
                                               keep_deletes, header.is_control, self.map.slots, self.map.arena,
                                               self.map.offsets, keep)
        self.stats.invalid_messages += invalid
        if not kept:
            return empty_batch(header) if retain_empty else None
        self.stats.messages_written += kept
        marker_for_empty_txn = can_discard and header.is_control
        set_horizon = (tombstones > 0 or marker_for_empty_txn) and not header.has_delete_horizon
        if kept == count and not set_horizon:
            return chunk[pos:pos + header.size]
        horizon = None
        if set_horizon:
            horizon = now + self.log.config.delete_retention_ms
            if self.latest_delete_horizon_ms is None or horizon > self.latest_delete_horizon_ms:
                self.latest_delete_horizon_ms = horizon
        if first >= 0:
            buf, section_start, section_end = _records_section(chunk, pos, header)
            noted_fields(buf, section_start, count, memo.records, first, keep, fields)
        out = scratch.out_for(section_end - section_start + 6 * count)
        end, max_delta = write_kept(buf, fields, 0, count, section_start, keep, horizon is not None,
                                    horizon or 0, header.base_timestamp, header.max_timestamp,
                                    header.timestamp_type == 1, out, 0)
        return rebuild_batch(header, out[:end].tobytes(), kept, int(max_delta), horizon)

    def _checker(self, segment: LogSegment) -> Callable[[], None]:
        def check() -> None:
            if self.log.closed or segment not in self.log.segments:
                raise CleaningAborted(f"{self.log.topic_partition}: segment {segment.base_offset} went away")
        return check

    def _last_records_of_active_producers(self) -> dict[int, LastRecord]:
        out: dict[int, LastRecord] = {}
        for pid, entry in self.log.producer_state.producers.items():
            last_data = entry.batches[-1].last_offset if entry.batches else None
            out[pid] = LastRecord(last_data, entry.producer_epoch)
        return out


def _records_section(chunk: bytes, pos: int, header: BatchHeader) -> tuple[np.ndarray, int, int]:
    """The batch's records section (decompressed when compressed): (buffer, start, end)."""
    if header.compression == 0:
        return np.frombuffer(chunk, dtype=np.uint8), pos + RECORD_BATCH_OVERHEAD, pos + header.size
    buf = np.frombuffer(records_of(chunk, pos, header), dtype=np.uint8)
    return buf, 0, len(buf)


def _signed_crc(header: BatchHeader) -> int:
    """The CRC as the compiled walk reads it (a signed 32-bit field), for `record_memo`."""
    return header.crc - (1 << 32) if header.crc >= 1 << 31 else header.crc


def _control_type(chunk: bytes, pos: int, header: BatchHeader) -> ControlType:
    try:
        return read_control_type(chunk, pos)
    except Exception:  # an unreadable control record is an unknown type, as Kafka ignores it
        return ControlType.UNKNOWN


def _segments_between(log: Log, start: int, end: int) -> list[LogSegment]:
    """Kafka `logSegments(start, end)`: the segments overlapping [start, end)."""
    out = []
    segments = log.segments
    for i, segment in enumerate(segments):
        upper = segments[i + 1].base_offset if i + 1 < len(segments) else log.log_end_offset
        if segment.base_offset < end and upper > start:
            out.append(segment)
    return out


def group_segments_by_size(segments: list[LogSegment], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[LogSegment]]:
    """Kafka `Cleaner.groupSegmentsBySize`: consecutive segments whose log bytes and index
    bytes each stay within one segment's limits and whose offsets stay int32-relative."""
    groups: list[list[LogSegment]] = []
    remaining = list(segments)
    while remaining:
        group = [remaining.pop(0)]
        log_size = group[0].size
        index_size = len(group[0].offset_index) * 8
        time_index_size = len(group[0].time_index) * 12
        while remaining:
            nxt = remaining[0]
            last_offset = (remaining[1].base_offset - 1 if len(remaining) > 1 else first_uncleanable_offset - 1)
            if (log_size + nxt.size > max_size
                    or index_size + len(nxt.offset_index) * 8 > max_index_size
                    or time_index_size + len(nxt.time_index) * 12 > max_index_size
                    or last_offset - group[0].base_offset > _INT32_MAX):
                break
            group.append(remaining.pop(0))
            log_size += nxt.size
            index_size += len(nxt.offset_index) * 8
            time_index_size += len(nxt.time_index) * 12
        groups.append(group)
    return groups


def _producer_arrays(last_records: dict[int, LastRecord]) -> tuple[np.ndarray, np.ndarray]:
    """The active producers' ids, sorted, and their last data offsets (-1: none), for the
    compiled filter."""
    pids = np.array(sorted(last_records), dtype=np.int64)
    last = np.array([_or_minus_one(last_records[int(p)].last_data_offset) for p in pids], dtype=np.int64)
    return pids, last


def _or_minus_one(offset: int | None) -> int:
    return -1 if offset is None else offset


class _Scratch:
    """The round's reusable arrays for the compiled scans, grown on demand."""

    def __init__(self) -> None:
        self.fields = np.empty((FIELDS, 64), dtype=np.int64)
        self.keep = np.empty(64, dtype=np.bool_)
        self.out = np.empty(1 << 16, dtype=np.uint8)
        self.crc_positions = np.empty(64, dtype=np.int64)
        self.written = np.empty((4, 64), dtype=np.int64)

    def fields_for(self, records: int) -> np.ndarray:
        if records > self.fields.shape[1]:
            self.fields = np.empty((FIELDS, records), dtype=np.int64)
        return self.fields

    def keep_for(self, records: int) -> np.ndarray:
        if records > len(self.keep):
            self.keep = np.empty(records, dtype=np.bool_)
        return self.keep

    def out_for(self, size: int) -> np.ndarray:
        if size > len(self.out):
            self.out = np.empty(size, dtype=np.uint8)
        return self.out

    def written_for(self, batches: int) -> np.ndarray:
        if batches > self.written.shape[1]:
            self.written = np.empty((4, batches), dtype=np.int64)
        return self.written

    def crc_positions_for(self, batches: int) -> np.ndarray:
        if batches > len(self.crc_positions):
            self.crc_positions = np.empty(batches, dtype=np.int64)
        return self.crc_positions
