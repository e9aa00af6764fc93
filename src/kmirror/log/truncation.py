"""Truncation and deletion of a log's records, a part of `Log`: follower truncation (Kafka
`UnifiedLog.truncateTo` / `truncateFullyAndStartAt`), DeleteRecords raising the log start
offset (`maybeIncrementLogStartOffset`) and retention (`deleteOldSegments`, whose rules are
the pure functions of `retention`)."""

from __future__ import annotations

from kmirror.log import retention
from kmirror.log.checkpoint import LeaderEpochCheckpoint
from kmirror.log.config import LogConfig
from kmirror.log.epoch_cache import EpochCache
from kmirror.log.outcomes import OK, OffsetOutOfRange, Ok
from kmirror.log.producer_state import ProducerState
from kmirror.log.segment import LogSegment
from kmirror.ports import Clock


class LogTruncation:
    # Provided by `Log`.
    config: LogConfig
    clock: Clock
    segments: list[LogSegment]
    epoch_cache: EpochCache
    producer_state: ProducerState
    recovery_point: int
    _log_start_offset: int
    _log_end_offset: int
    _high_watermark: int
    _epoch_checkpoint: LeaderEpochCheckpoint

    @property
    def active_segment(self) -> LogSegment:
        raise NotImplementedError

    @property
    def size_bytes(self) -> int:
        raise NotImplementedError

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        raise NotImplementedError

    def _new_segment(self, base_offset: int) -> LogSegment:
        raise NotImplementedError

    def _rebuild_producer_state(self) -> None:
        raise NotImplementedError

    def _notify_log_start(self) -> None:
        raise NotImplementedError

    def _changed(self) -> None:
        raise NotImplementedError

    def truncate_to(self, offset: int) -> bool:
        """Remove everything at and after `offset` (follower truncation); True if removed.
        The cut is fsynced so a crash cannot resurrect truncated records. At or above the
        log end no record is removed, but epoch entries starting at or after the log end are
        (Kafka `UnifiedLog.truncateTo`): an epoch a leader assigned without writing a record
        must not be taken for an epoch of the log."""
        if offset < 0:
            return False
        if offset >= self._log_end_offset:
            if self.epoch_cache.truncate_from_end(self._log_end_offset):
                self._epoch_checkpoint.write(self.epoch_cache)
            return False
        if offset < self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True
        while len(self.segments) > 1 and self.active_segment.base_offset >= offset:
            self.segments.pop().delete()
        segment = self.active_segment
        self._log_end_offset = segment.truncate_to(offset)
        segment.flush()
        self.recovery_point = min(self.recovery_point, self._log_end_offset)
        self._after_truncation()
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop every segment and restart the log empty at `offset`."""
        for segment in self.segments:
            segment.delete()
        segment = self._new_segment(offset)
        segment.create()
        self.segments = [segment]
        self._log_end_offset = offset
        self._log_start_offset = offset
        self.recovery_point = offset
        self.epoch_cache.clear()
        verifications = self.producer_state.verification_states
        self.producer_state = ProducerState()
        self.producer_state.verification_states = verifications  # in memory, not of the log
        self._after_truncation()
        self._notify_log_start()

    def _after_truncation(self) -> None:
        if self.epoch_cache.truncate_from_end(self._log_end_offset) or not len(self.epoch_cache):
            self._epoch_checkpoint.write(self.epoch_cache)
        self._high_watermark = min(max(self._high_watermark, self._log_start_offset), self._log_end_offset)
        if self.producer_state.affected_by_truncation(self._log_end_offset):
            self._rebuild_producer_state()
        self._changed()

    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> Ok | OffsetOutOfRange:
        """DeleteRecords: move the log start (never past the HW); segments wholly below it
        are deleted and the epoch cache and producer state follow."""
        if new_log_start_offset > self._high_watermark:
            return OffsetOutOfRange(new_log_start_offset, self._log_start_offset, self._high_watermark)
        if new_log_start_offset > self._log_start_offset:
            self._set_log_start_offset(new_log_start_offset)
            self._delete_segments(retention.below_log_start(new_log_start_offset))
        return OK

    def _set_log_start_offset(self, offset: int) -> None:
        self._log_start_offset = offset
        if self.epoch_cache.truncate_from_start(offset):
            self._epoch_checkpoint.write(self.epoch_cache)
        self.producer_state.remove_before(offset)
        self._notify_log_start()

    def delete_old_segments(self, now_ms: int | None = None) -> int:
        """Kafka retention: segments past the log start offset, then by retention.bytes, then
        by retention.ms (largest timestamp). Only segments wholly below the HW go; the active
        segment can go too (a new empty one is rolled first). Returns segments deleted."""
        now = self.clock.now_ms() if now_ms is None else now_ms
        deleted = self._delete_segments(retention.below_log_start(self._log_start_offset))
        if not self.config.delete_enabled:
            return deleted
        if self.config.retention_bytes >= 0:
            deleted += self._delete_segments(
                retention.over_retention_bytes(self.size_bytes, self.config.retention_bytes))
        if self.config.retention_ms >= 0:
            deleted += self._delete_segments(retention.past_retention_ms(now, self.config.retention_ms))
        return deleted

    def _delete_segments(self, predicate: retention.SegmentPredicate) -> int:
        count = retention.deletable_prefix(self.segments, self._log_end_offset, self._high_watermark, predicate)
        if not count:
            return 0
        deletable = self.segments[:count]
        if count == len(self.segments):
            self.roll()
        for segment in deletable:
            self.segments.remove(segment)
            segment.delete()
        new_start = max(self._log_start_offset, self.segments[0].base_offset)
        if new_start != self._log_start_offset:
            self._set_log_start_offset(new_start)
        return len(deletable)
