"""A partition's log (Kafka `UnifiedLog`/`LocalLog`, split by concept).

Offsets below `log_start_offset` are gone; `log_end_offset` (LEO) is the next offset to
assign; `high_watermark` (set by replication) bounds what consumers see and is always in
[log_start_offset, LEO]; `last_stable_offset` is the HW lowered to the first offset of the
oldest ongoing transaction. Appends are whole batches; the leader assigns offsets by
rewriting only each batch's baseOffset (and stamps its partitionLeaderEpoch), both outside
the CRC, so the stored bytes are the producer's otherwise (never recompressed).

Durability: data reaches the page cache on append and is fsynced by `flush` (on
flush.messages/flush.ms, at roll for the rolled segment, at close). The recovery point is
the offset below which everything is flushed; `Log.open` rescans segments from it.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from uuid import UUID

from kmirror.log import loader
from kmirror.log.append_analysis import AppendOrigin, analyze_for_append
from kmirror.log.checkpoint import LeaderEpochCheckpoint
from kmirror.log.config import LogConfig
from kmirror.log.epoch_cache import EpochCache
from kmirror.log.fs import Buffer, FileSystem
from kmirror.log.outcomes import (
    AppendError,
    FetchDataInfo,
    LogAppendInfo,
    OffsetOutOfRange,
    TimestampAndOffset,
)
from kmirror.log.partition_metadata import PartitionMetadataFile
from kmirror.log.producer_state import (
    PRODUCER_ID_EXPIRATION_MS,
    BatchMetadata,
    ProducerState,
    ProducerStateEntry,
    VerificationGuard,
    control_type_for_state,
    marker_coordinator_epoch,
)
from kmirror.log.segment import LogSegment
from kmirror.log.timestamp_lookup import find_offset_by_timestamp
from kmirror.log.transaction_index import AbortedTxn, CompletedTxn
from kmirror.log.truncation import LogTruncation
from kmirror.ports import Clock
from kmirror.protocol.errors import ErrorCode
from kmirror.records.batch import (
    NO_TIMESTAMP,
    BatchHeader,
    read_header,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
)
from kmirror.types import TopicPartition

_INT32_MAX = 2**31 - 1
_CORRUPT = ErrorCode.corrupt_message
_UNKNOWN = ErrorCode.unknown_server_error


class Log(LogTruncation):
    def __init__(self, fs: FileSystem, directory: str, topic_partition: TopicPartition, config: LogConfig,
                 clock: Clock, topic_id: UUID | None = None) -> None:
        """No I/O: use `Log.open` to load or create the directory."""
        self.fs = fs
        self.directory = directory
        self.topic_partition = topic_partition
        self.config = config
        self.clock = clock
        self.topic_id = topic_id
        self.segments: list[LogSegment] = []
        self.epoch_cache = EpochCache()
        self.producer_state = ProducerState()
        self.producer_id_expiration_ms = PRODUCER_ID_EXPIRATION_MS
        self.recovery_point = 0
        self._log_start_offset = 0
        self._log_end_offset = 0
        self._high_watermark = 0
        self._unflushed_messages = 0
        self._last_flush_ms = clock.monotonic_ms()
        self._epoch_checkpoint = LeaderEpochCheckpoint(fs, directory)
        self.partition_metadata = PartitionMetadataFile(fs, directory)
        self.on_log_start_offset_change: Callable[[Log], None] | None = None
        # Told the partition whenever the log end, high watermark or log start moves (the
        # replica manager's change journal: fetch sessions check only what changed).
        self.on_change: Callable[[TopicPartition], None] | None = None
        self.closed = False

    @classmethod
    def open(cls, fs: FileSystem, path: str, topic_partition: TopicPartition, config: LogConfig, clock: Clock,
             topic_id: UUID | None = None, *, recovery_point: int = 0, log_start_offset: int = 0,
             high_watermark: int | None = None) -> Log:
        """Load (recovering from `recovery_point`) or create the partition directory."""
        log = cls(fs, path, topic_partition, config, clock, topic_id)
        loader.load(log, recovery_point=recovery_point, log_start_offset=log_start_offset)
        hw = log._log_start_offset if high_watermark is None else high_watermark
        log._high_watermark = min(max(hw, log._log_start_offset), log._log_end_offset)
        return log

    # -- offsets ----------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    def update_high_watermark(self, offset: int) -> int:
        """Set the HW, clamped to [log_start_offset, log_end_offset]; returns the value set."""
        high_watermark = min(max(offset, self._log_start_offset), self._log_end_offset)
        if high_watermark != self._high_watermark:
            self._high_watermark = high_watermark
            self._changed()
        return high_watermark

    @property
    def last_stable_offset(self) -> int:
        unstable = self.producer_state.first_unstable_offset
        return self._high_watermark if unstable is None else min(unstable, self._high_watermark)

    @property
    def latest_epoch(self) -> int | None:
        return self.epoch_cache.latest_epoch

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    size_in_bytes = size_bytes

    def epoch_for_offset(self, offset: int) -> int | None:
        return self.epoch_cache.epoch_for_offset(offset)

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int] | None:
        """(epoch, end offset) per Kafka `endOffsetForEpoch`; None when undefined."""
        epoch, end_offset = self.epoch_cache.end_offset_for(leader_epoch, self._log_end_offset)
        return None if end_offset == -1 else (epoch, end_offset)

    # -- append -----------------------------------------------------------------------------

    def maybe_start_transaction_verification(self, producer_id: int, sequence: int, epoch: int,
                                             now_ms: int | None = None) -> VerificationGuard | AppendError:
        """Kafka `UnifiedLog.maybeStartTransactionVerification` (KIP-890 part 1), before the
        leader asks the coordinator about a transactional batch: `SENTINEL` when a transaction
        of this epoch is already open here (nothing to verify), INVALID_PRODUCER_EPOCH for an
        epoch older than the producer's, else the guard of the producer's verification entry
        (new, or the one in progress), which the append must carry."""
        entry = self.producer_state.producers.get(producer_id)
        if entry is not None and epoch < entry.producer_epoch:
            return AppendError(ErrorCode.invalid_producer_epoch,
                               f"Epoch of producer {producer_id} is {epoch}, which is smaller than the last "
                               f"seen epoch {entry.producer_epoch}")
        if self.producer_state.has_ongoing_transaction(producer_id, epoch):
            return VerificationGuard.SENTINEL
        now = self.clock.now_ms() if now_ms is None else now_ms
        return self.producer_state.maybe_create_verification_state_entry(producer_id, sequence, epoch,
                                                                         now).verification_guard

    def remove_expired_producers(self, now_ms: int | None = None, expiration_ms: int | None = None) -> int:
        """Forget the producers and verification entries past `producer.id.expiration.ms`
        (`expiration_ms`, which then also applies to a state rebuilt after a truncation;
        default: the last value given); returns how many producers went."""
        if expiration_ms is not None:
            self.producer_id_expiration_ms = expiration_ms
        return self.producer_state.remove_expired_producers(self.clock.now_ms() if now_ms is None else now_ms,
                                                            self.producer_id_expiration_ms)

    def append_as_leader(self, records: Buffer, leader_epoch: int, now_ms: int | None = None, *,
                         origin: AppendOrigin = AppendOrigin.CLIENT,
                         produce_version: int | None = None,
                         verification_guard: VerificationGuard | None = None) -> LogAppendInfo | AppendError:
        """Validate (client writes), check producer state, assign offsets from the LEO and
        append. A retried duplicate batch returns its original offsets (`duplicate=True`).
        `verification_guard`: the append path verifies transactions (KIP-890 part 1), and this
        is the guard `maybe_start_transaction_verification` gave it (`SENTINEL` if none); a
        batch that would start a transaction is refused unless the producer's verification
        entry still holds it. None: the caller does not verify (Kafka's
        `transaction.partition.verification.enable=false`; coordinator writes)."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        result = analyze_for_append(records, self.config, now, origin, produce_version)
        if isinstance(result, AppendError):
            return result
        analyzed, valid_bytes = result
        buf = bytearray(memoryview(records)[:valid_bytes])
        scratch = ProducerState()
        for _, header in analyzed:
            if header.has_producer_id and header.producer_id not in scratch.producers:
                entry = self.producer_state.producers.get(header.producer_id)
                if entry is not None:
                    scratch.producers[header.producer_id] = _copy_entry(entry)
                verification = self.producer_state.verification_state_entry(header.producer_id)
                if verification is not None:  # never mutated by an append, only removed
                    scratch.verification_states[header.producer_id] = verification
        offset = self._log_end_offset
        assigned: list[BatchHeader] = []
        completed: list[tuple[CompletedTxn, int]] = []
        for pos, header in analyzed:
            marker_epoch = marker_coordinator_epoch(buf, pos, header)
            checked = scratch.check_client_batch(header, marker_epoch, verification_guard)
            if isinstance(checked, AppendError):
                return checked
            if isinstance(checked, BatchMetadata):
                return self._duplicate_info(checked)
            set_base_offset(buf, pos, offset)
            set_partition_leader_epoch(buf, pos, leader_epoch)
            if self.config.log_append_time:
                set_log_append_time(buf, pos, now)
            stamped = read_header(buf, pos)
            txn = scratch.update(stamped, control_type=control_type_for_state(buf, pos, stamped),
                                 coordinator_epoch=marker_epoch)
            if txn is not None:
                others = ProducerState()
                others.producers = {**self.producer_state.producers, **scratch.producers}
                completed.append((txn, others.last_stable_offset_after(txn)))
            assigned.append(stamped)
            offset = stamped.next_offset
        self._maybe_roll(len(buf), assigned, now)
        if self.epoch_cache.assign(leader_epoch, assigned[0].base_offset):
            self._epoch_checkpoint.write(self.epoch_cache, sync=False)
        self._append_to_segment(buf, assigned)
        if scratch.last_reset_offset >= 0:  # MIRROR_PID_RESET: producers before it are gone
            self.producer_state.expire_all(scratch.last_reset_offset)
        self.producer_state.producers.update(scratch.producers)
        for _, header in analyzed:  # verifications the append ended (`ProducerState.update`)
            if header.has_producer_id and header.producer_id not in scratch.verification_states:
                self.producer_state.clear_verification_state_entry(header.producer_id)
        self._index_completed_txns(completed)
        return self._append_info(assigned, len(buf), now if self.config.log_append_time else NO_TIMESTAMP)

    def append_as_follower(self, records: Buffer) -> LogAppendInfo | AppendError:
        """Append batches with their offsets, epochs and bytes unchanged (replication and
        mirroring). The first offset must be >= LEO (gaps allowed: compacted sources)."""
        result = analyze_for_append(records, self.config, self.clock.now_ms(), AppendOrigin.REPLICATION)
        if isinstance(result, AppendError):
            return result
        analyzed, valid_bytes = result
        buf = bytes(memoryview(records)[:valid_bytes])
        headers = [h for _, h in analyzed]
        if headers[0].base_offset < self._log_end_offset:
            return AppendError(_UNKNOWN, f"first offset {headers[0].base_offset} of a replicated append "
                                         f"is below the log end offset {self._log_end_offset}")
        for previous, header in zip(headers, headers[1:], strict=False):
            if header.base_offset < previous.next_offset:
                return AppendError(_CORRUPT, f"offsets out of order at {header.base_offset}")
        self._maybe_roll(len(buf), headers, self.clock.now_ms())
        changed = False
        for header in headers:
            if header.partition_leader_epoch >= 0:
                changed |= self.epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        if changed:
            self._epoch_checkpoint.write(self.epoch_cache, sync=False)
        self._append_to_segment(buf, headers)
        completed: list[tuple[CompletedTxn, int]] = []
        for (pos, _), header in zip(analyzed, headers, strict=True):
            txn = self.producer_state.update(header, control_type=control_type_for_state(buf, pos, header),
                                             coordinator_epoch=marker_coordinator_epoch(buf, pos, header))
            if txn is not None:
                completed.append((txn, self.producer_state.last_stable_offset_after(txn)))
        self._index_completed_txns(completed)
        return self._append_info(headers, len(buf), NO_TIMESTAMP)

    def _index_completed_txns(self, completed: list[tuple[CompletedTxn, int]]) -> None:
        """Kafka `UnifiedLog.append`: each aborted transaction whose marker was just appended
        goes to the active segment's transaction index, with the LSO right after its marker.
        Kafka takes that LSO after the whole append, so its value depends on how batches
        were grouped into appends; taken per marker it depends on the log alone, and a
        mirror, a follower and a recovery write the same index as the source leader."""
        for txn, last_stable_offset in completed:
            self.active_segment.update_txn_index(txn, last_stable_offset)

    def _append_to_segment(self, buf: Buffer, headers: list[BatchHeader]) -> None:
        """`headers`: every batch of `buf`, in order (read once by the append's analysis)."""
        self.active_segment.append(buf, [(h.base_offset, h.last_offset, h.max_timestamp, h.size) for h in headers])
        self._log_end_offset = headers[-1].next_offset
        self._changed()
        self._unflushed_messages += sum(h.records_count for h in headers)
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush()

    def _append_info(self, headers: list[BatchHeader], size: int, log_append_time: int) -> LogAppendInfo:
        max_header = max(headers, key=lambda h: h.max_timestamp)
        return LogAppendInfo(
            first_offset=headers[0].base_offset, last_offset=headers[-1].last_offset,
            max_timestamp=max_header.max_timestamp, offset_of_max_timestamp=max_header.last_offset,
            log_append_time_ms=log_append_time, log_start_offset=self._log_start_offset,
            records_count=sum(h.records_count for h in headers), valid_bytes=size)

    def _duplicate_info(self, batch: BatchMetadata) -> LogAppendInfo:
        return LogAppendInfo(
            first_offset=batch.first_offset, last_offset=batch.last_offset, max_timestamp=batch.timestamp,
            offset_of_max_timestamp=batch.last_offset, log_append_time_ms=NO_TIMESTAMP,
            log_start_offset=self._log_start_offset, records_count=batch.last_offset - batch.first_offset + 1,
            valid_bytes=0, duplicate=True)

    # -- roll and flush ---------------------------------------------------------------------

    def _maybe_roll(self, size: int, headers: list[BatchHeader], now_ms: int) -> None:
        """Kafka `UnifiedLog.maybeRoll`: full segment, segment.ms elapsed since the first
        batch's timestamp, a full index, or offsets beyond the int32 relative range."""
        segment = self.active_segment
        max_timestamp = max(h.max_timestamp for h in headers)
        first_offset, last_offset = headers[0].base_offset, headers[-1].last_offset
        if (last_offset - segment.base_offset > _INT32_MAX
                or (segment.size > 0 and (
                    segment.size > self.config.segment_bytes - size
                    or segment.time_waited_for_roll(now_ms, max_timestamp)
                    >= self.config.segment_ms - self.config.segment_jitter_ms
                    or segment.offset_index.is_full or segment.time_index.is_full))):
            self.roll(first_offset)

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(LEO, expected_next_offset); the previous one is
        flushed (Kafka flushes it asynchronously), which moves the recovery point."""
        new_base = max(self._log_end_offset, expected_next_offset or 0)
        active = self.active_segment
        if active.base_offset == new_base:
            return active
        if active.size == 0:
            active.delete()
            self.segments.pop()
        else:
            active.on_become_inactive()
            active.flush()
            self._epoch_checkpoint.sync(self.epoch_cache)
            self.recovery_point = max(self.recovery_point, self._log_end_offset)
        segment = loader.new_segment(self, new_base)
        segment.create()
        self.segments.append(segment)
        return segment

    def flush(self) -> None:
        """fsync everything appended so far; the recovery point becomes the LEO. A new log's
        topic id and directory entry first (Kafka `maybeFlushMetadataFile`)."""
        self.partition_metadata.maybe_flush()
        for segment in self.segments:
            if segment.next_offset() > self.recovery_point or segment is self.active_segment:
                segment.flush()
        self._epoch_checkpoint.sync(self.epoch_cache)
        self.recovery_point = self._log_end_offset
        self._unflushed_messages = 0
        self._last_flush_ms = self.clock.monotonic_ms()

    def assign_epoch_start_offset(self, leader_epoch: int, start_offset: int) -> None:
        """A new leader's epoch starts at `start_offset` (Kafka `maybeAssignEpochStartOffset`)."""
        if self.epoch_cache.assign(leader_epoch, start_offset):
            self._epoch_checkpoint.write(self.epoch_cache, sync=False)

    def maybe_flush(self) -> bool:
        """Flush when flush.ms elapsed since the last flush with data pending."""
        due = self.clock.monotonic_ms() - self._last_flush_ms >= self.config.flush_ms
        if due and (self._unflushed_messages or self.recovery_point < self._log_end_offset):
            self.flush()
            return True
        return False

    # -- read -------------------------------------------------------------------------------

    def read(self, fetch_offset: int, max_bytes: int, max_offset: int | None = None,
             min_one_message: bool = True) -> FetchDataInfo | OffsetOutOfRange:
        """Kafka `LocalLog.read`: bytes from the batch containing `fetch_offset`, bounded by
        `max_offset` (exclusive: the HW or LSO for consumers) and `max_bytes`."""
        if fetch_offset < self._log_start_offset or fetch_offset > self._log_end_offset:
            return OffsetOutOfRange(fetch_offset, self._log_start_offset, self._log_end_offset)
        bound = self._log_end_offset if max_offset is None else min(max_offset, self._log_end_offset)
        if fetch_offset >= bound:
            return FetchDataInfo(b"", fetch_offset)
        index = self._segment_index_for(fetch_offset)
        while index < len(self.segments):
            segment = self.segments[index]
            max_position: int | None = None
            if bound < segment.next_offset():
                found = segment.locate(bound)
                max_position = found[0] if found is not None else None
                if found is not None and found[1] < bound <= found[2]:
                    max_position = found[0] + found[3]
            result = segment.read(fetch_offset, max_bytes, max_position, min_one_message)
            if result is not None:
                return FetchDataInfo(result.records, fetch_offset)
            if max_position is not None:
                break
            index += 1
        return FetchDataInfo(b"", fetch_offset)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset) (Kafka
        `UnifiedLog.collectAbortedTransactions`): from the segment holding `start_offset`
        onwards, since a transaction starting there may be aborted in a later segment."""
        found: list[AbortedTxn] = []
        for segment in self.segments[self._segment_index_for(start_offset):]:
            result = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            found.extend(result.aborted_transactions)
            if result.is_complete:
                break
        return found

    def _segment_index_for(self, offset: int) -> int:
        bases = [s.base_offset for s in self.segments]
        return max(0, bisect.bisect_right(bases, offset) - 1)

    def fetch_offset_by_timestamp(self, timestamp_ms: int) -> TimestampAndOffset | None:
        return find_offset_by_timestamp(self, timestamp_ms)

    def active_producers(self) -> list[ProducerStateEntry]:
        """The producers the log keeps state for (Kafka `UnifiedLog.activeProducers`)."""
        return list(self.producer_state.producers.values())

    def _new_segment(self, base_offset: int) -> LogSegment:
        return loader.new_segment(self, base_offset)

    def _rebuild_producer_state(self) -> None:
        """After a truncation: the state of the batches left, without the producers that have
        expired (Kafka `ProducerStateManager.truncateAndReload` skips them)."""
        loader.rebuild_producer_state(self)
        self.remove_expired_producers()

    def _notify_log_start(self) -> None:
        if self.on_log_start_offset_change is not None:
            self.on_log_start_offset_change(self)
        self._changed()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change(self.topic_partition)

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Clean shutdown: flush everything, write the epoch checkpoint and producer snapshot."""
        if self.closed:
            return
        self.active_segment.on_become_inactive()
        self.flush()
        self._epoch_checkpoint.write(self.epoch_cache)
        loader.write_producer_snapshot(self)
        for segment in self.segments:
            segment.close()
        self.partition_metadata.close()
        self.closed = True

    def delete(self) -> None:
        """Remove the whole partition directory."""
        self.partition_metadata.close()
        for segment in self.segments:
            segment.delete()
        self.segments = []
        self.fs.delete(self.directory)
        self.closed = True

    def __repr__(self) -> str:
        return (f"Log({self.topic_partition}, start={self._log_start_offset}, end={self._log_end_offset}, "
                f"hw={self._high_watermark}, segments={len(self.segments)})")


def _copy_entry(entry: ProducerStateEntry) -> ProducerStateEntry:
    return ProducerStateEntry(entry.producer_id, entry.producer_epoch, list(entry.batches),
                              entry.current_txn_first_offset, entry.last_timestamp, entry.last_offset,
                              entry.coordinator_epoch)
