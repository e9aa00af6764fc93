"""Swapping a cleaned segment in for the segments it replaces (Kafka `LocalLog.replaceSegments`).

Crash-safe order, every step durable before the next:
1. the cleaned segment is written as `<base>.log.cleaned` (+ `.index.cleaned`, ...) and fsynced;
2. its files are renamed to `.swap`, the `.log` last: a `<base>.log.swap` is a complete
   cleaned segment;
3. the replaced segments' files are deleted, or, with `defer_deletes` (as Kafka's
   `asyncDeleteSegment`), renamed to `.deleted` for the caller to delete after
   `file.delete.delay.ms` (the load removes `.deleted` files left by a crash);
4. the `.swap` files are renamed to their final names, the `.log` last.
A crash before 2 leaves `.cleaned` files that recovery deletes (the old segments are whole).
A crash after 2 is completed by recovery (`swap_recovery.complete_swaps`). The cleaned
segment keeps the next offset of the group (the last batch of each source segment is kept,
if only as an empty batch), so the swap file's offset range names every replaced segment.
"""

from __future__ import annotations

from kmirror.log.log import Log
from kmirror.log.segment import LogSegment

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"


class CleaningAborted(Exception):
    """The log changed under a cleaning round (truncated, deleted, retention removed a
    segment of the group): the round's output is dropped, the log is untouched."""


def new_cleaned_segment(log: Log, base_offset: int) -> LogSegment:
    segment = LogSegment(log.fs, log.directory, base_offset, index_interval_bytes=log.config.index_interval_bytes,
                         max_index_size=log.config.segment_index_bytes, created_ms=log.clock.now_ms(),
                         file_suffix=CLEANED_SUFFIX)
    for path in (segment.log_path, segment.offset_index.path, segment.time_index.path, segment.txn_index.path):
        log.fs.delete(path)
    segment.create()
    return segment


def replace_segments(log: Log, cleaned: LogSegment, old: list[LogSegment], old_sizes: list[int], *,
                     defer_deletes: bool = False) -> None:
    """Swap `cleaned` in for `old` (consecutive segments of `log`), or raise
    `CleaningAborted` when `old` is no longer what the round read."""
    segments = log.segments
    if log.closed or not old or old[0] not in segments:
        raise CleaningAborted(f"{log.topic_partition}: segment {old[0].base_offset if old else '?'} is gone")
    start = segments.index(old[0])
    current = segments[start:start + len(old)]
    if (len(current) != len(old) or any(a is not b for a, b in zip(current, old, strict=True))
            or [s.size for s in old] != old_sizes or start + len(old) >= len(segments)):
        raise CleaningAborted(f"{log.topic_partition}: segments changed during cleaning")
    cleaned.on_become_inactive()
    cleaned.flush()
    cleaned.change_file_suffix(SWAP_SUFFIX)
    if defer_deletes:  # one rename_all: a .deleted file is a stray to recovery whichever were renamed
        log.fs.rename_all([move for segment in old for move in segment.file_suffix_moves(DELETED_SUFFIX)])
        for segment in old:
            segment.set_file_suffix(DELETED_SUFFIX)
    else:
        for segment in old:
            segment.delete()
    cleaned.change_file_suffix("")
    cleaned.rolling_based_timestamp = None
    segments[start:start + len(old)] = [cleaned]
