"""The cleaner's bookkeeping across logs (Kafka `LogCleanerManager`): first dirty offsets
(`cleaner-offset-checkpoint` per log dir), logs being cleaned, logs that failed (marked
uncleanable until restart, as Kafka does), and each log's latest delete horizon.

Not a scheduler: the shell asks `grab_filthiest_log` for work, runs the round it gets, and
reports `done_cleaning` / `abort_cleaning` / `mark_uncleanable`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kmirror.log.cleaner.checkpoint import CleanerOffsetCheckpoint
from kmirror.log.cleaner.cleanable import LogToClean, filthiest, log_to_clean
from kmirror.log.fs import FileSystem
from kmirror.log.log import Log
from kmirror.types import TopicPartition


class LogCleanerManager:
    def __init__(self, fs: FileSystem) -> None:
        self.fs = fs
        self.in_progress: set[TopicPartition] = set()
        self.uncleanable: set[TopicPartition] = set()
        self.latest_delete_horizon_ms: dict[TopicPartition, int] = {}
        self._checkpoints: dict[str, dict[TopicPartition, int]] = {}

    def checkpoints(self, log_dir: str) -> dict[TopicPartition, int]:
        offsets = self._checkpoints.get(log_dir)
        if offsets is None:
            offsets = self._checkpoints[log_dir] = CleanerOffsetCheckpoint(self.fs, log_dir).read()
        return offsets

    def grab_filthiest_log(self, logs: Iterable[tuple[Log, str]], now_ms: int,
                           may_clean: Callable[[TopicPartition], bool] = lambda tp: True) -> LogToClean | None:
        """The compacted log to clean next, marked in progress; None when none is due."""
        candidates: list[LogToClean] = []
        for log, log_dir in logs:
            tp = log.topic_partition
            if (not log.config.compact_enabled or log.closed or tp in self.in_progress
                    or tp in self.uncleanable or not may_clean(tp)):
                continue
            candidates.append(log_to_clean(log, self.checkpoints(log_dir).get(tp), now_ms))
        chosen = filthiest(candidates)
        if chosen is None:
            expired = [c for c in candidates
                       if self.latest_delete_horizon_ms.get(c.log.topic_partition, now_ms + 1) <= now_ms]
            chosen = expired[0] if expired else None
        if chosen is not None:
            self.in_progress.add(chosen.log.topic_partition)
        return chosen

    def done_cleaning(self, log: Log, log_dir: str, end_offset: int, round_now_ms: int,
                      round_delete_horizon_ms: int | None, live: Iterable[TopicPartition]) -> None:
        """Checkpoint `end_offset` as the log's first dirty offset (only live logs are
        written, so a deleted topic's entry goes)."""
        tp = log.topic_partition
        self.in_progress.discard(tp)
        offsets = self.checkpoints(log_dir)
        offsets[tp] = end_offset
        live_set = set(live)
        for stale in [p for p in offsets if p not in live_set]:
            del offsets[stale]
        CleanerOffsetCheckpoint(self.fs, log_dir).write(offsets)
        previous = self.latest_delete_horizon_ms.get(tp)
        if previous is not None and previous <= round_now_ms:
            previous = None  # this round already saw those horizons pass
        horizons = [h for h in (previous, round_delete_horizon_ms) if h is not None]
        if horizons:
            self.latest_delete_horizon_ms[tp] = max(horizons)
        else:
            self.latest_delete_horizon_ms.pop(tp, None)

    def abort_cleaning(self, tp: TopicPartition) -> None:
        self.in_progress.discard(tp)

    def mark_uncleanable(self, tp: TopicPartition) -> None:
        self.in_progress.discard(tp)
        self.uncleanable.add(tp)
