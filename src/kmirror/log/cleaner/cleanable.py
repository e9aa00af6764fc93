"""Which part of a log may be cleaned, and which log to clean next (Kafka
`LogCleanerManager.cleanableOffsets`, `LogToClean`, `grabFilthiestCompactedLog`).

- first dirty offset: the `cleaner-offset-checkpoint` entry, reset to the log start when it
  lies outside [log start, log end];
- first uncleanable offset: the smallest of the last stable offset (never clean what is not
  yet committed and replicated), the active segment's base offset, and (KIP-58
  `min.compaction.lag.ms`) the first dirty segment whose largest timestamp is newer than
  now minus the lag; rounded down to the base offset of the segment that holds it;
- dirty ratio: cleanable bytes / (clean + cleanable bytes), against
  `min.cleanable.dirty.ratio`; KIP-354 `max.compaction.lag.ms`: a log whose first dirty
  segment is older than the lag is cleaned now whatever its ratio;
- KIP-534: when no log is due, a log whose latest delete horizon has passed is cleaned so
  its tombstones and empty-transaction markers go.
"""

from __future__ import annotations

from dataclasses import dataclass

from kmirror.log.config import LONG_MAX
from kmirror.log.log import Log
from kmirror.log.segment import LogSegment


@dataclass(frozen=True, slots=True)
class LogToClean:
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    max_compaction_delay_ms: int

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def needs_compaction_now(self) -> bool:
        return self.max_compaction_delay_ms > 0


def _upper_offset(log: Log, index: int) -> int:
    segments = log.segments
    return segments[index + 1].base_offset if index + 1 < len(segments) else log.log_end_offset


def _first_batch_timestamp(segment: LogSegment) -> int:
    header = segment.read_header_at(0) if segment.size else None
    return header.max_timestamp if header is not None else segment.largest_timestamp


def log_to_clean(log: Log, checkpoint: int | None, now_ms: int) -> LogToClean:
    segments = log.segments
    first_dirty = log.log_start_offset if checkpoint is None else checkpoint
    if first_dirty < log.log_start_offset or first_dirty > log.log_end_offset:
        first_dirty = log.log_start_offset
    active_base = log.active_segment.base_offset
    dirty_non_active = [(i, s) for i, s in enumerate(segments[:-1]) if _upper_offset(log, i) > first_dirty]
    candidates = [log.last_stable_offset, active_base]
    min_lag = max(log.config.min_compaction_lag_ms, 0)
    if min_lag > 0:
        for _, segment in dirty_non_active:
            if segment.largest_timestamp > now_ms - min_lag:
                candidates.append(segment.base_offset)
                break
    uncleanable = min(candidates)
    # rounded down to the base offset of the segment holding it (Kafka `LogToClean`)
    first_uncleanable = active_base
    for i, segment in enumerate(segments):
        if segment.base_offset <= uncleanable < _upper_offset(log, i) or segment.base_offset >= uncleanable:
            first_uncleanable = min(segment.base_offset, active_base)
            break
    clean_bytes = sum(s.size for i, s in enumerate(segments) if s.base_offset < first_dirty
                      and _upper_offset(log, i) <= first_dirty)
    cleanable_bytes = sum(s.size for i, s in enumerate(segments)
                          if s.base_offset < first_uncleanable and _upper_offset(log, i) > first_dirty)
    delay = 0
    max_lag = log.config.max_compaction_lag_ms
    if 0 < max_lag < LONG_MAX and dirty_non_active:
        earliest = _first_batch_timestamp(dirty_non_active[0][1])
        clean_until = now_ms - max_lag
        if 0 <= earliest < clean_until:
            delay = clean_until - earliest
    return LogToClean(log, first_dirty, max(first_uncleanable, first_dirty), clean_bytes, cleanable_bytes, delay)


def is_due(candidate: LogToClean) -> bool:
    return ((candidate.needs_compaction_now and candidate.cleanable_bytes > 0)
            or (candidate.cleanable_bytes > 0
                and candidate.cleanable_ratio > candidate.log.config.min_cleanable_dirty_ratio))


def filthiest(candidates: list[LogToClean]) -> LogToClean | None:
    due = [c for c in candidates if is_due(c)]
    return max(due, key=lambda c: c.cleanable_ratio) if due else None
