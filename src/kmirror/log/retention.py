"""Kafka's log retention rules (`UnifiedLog.deleteOldSegments`) over a log's segments, as
pure functions: which leading segments may be deleted. `Log.delete_old_segments` applies them
in Kafka's order (below the log start offset, then `retention.bytes`, then `retention.ms`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kmirror.log.segment import LogSegment

SegmentPredicate = Callable[[LogSegment, LogSegment | None], bool]
"""(segment, the next segment or None for the active one) -> may it go."""


def deletable_prefix(segments: Sequence[LogSegment], log_end_offset: int, high_watermark: int,
                     predicate: SegmentPredicate) -> int:
    """How many leading segments may go: each must lie wholly below the high watermark and
    satisfy `predicate` (asked in offset order, stopping at the first refusal); an empty
    active segment never goes."""
    count = 0
    for i, segment in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        upper = nxt.base_offset if nxt is not None else log_end_offset
        if nxt is None and segment.size == 0:
            break
        if not (high_watermark >= upper and predicate(segment, nxt)):
            break
        count += 1
    return count


def below_log_start(log_start_offset: int) -> SegmentPredicate:
    """Segments whose every offset is below the log start offset (DeleteRecords, a raised start)."""
    return lambda seg, nxt: nxt is not None and nxt.base_offset <= log_start_offset


def over_retention_bytes(size_bytes: int, retention_bytes: int) -> SegmentPredicate:
    """The oldest segments whose removal keeps the log at or above `retention.bytes`."""
    excess = [size_bytes - retention_bytes]

    def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
        if excess[0] - seg.size >= 0:
            excess[0] -= seg.size
            return True
        return False

    return over_size


def past_retention_ms(now_ms: int, retention_ms: int) -> SegmentPredicate:
    """Segments whose largest timestamp is older than `retention.ms`."""
    return lambda seg, nxt: seg.largest_timestamp >= 0 and now_ms - seg.largest_timestamp > retention_ms
