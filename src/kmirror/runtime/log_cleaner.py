"""The log cleaner's asyncio shell (Kafka `LogCleaner` and its `CleanerThread`s).

`log.cleaner.threads` workers run on the node's event loop. Each asks the
`LogCleanerManager` for the filthiest compacted log, runs the round's generator one bounded
step (`STEP_BYTES` of log read) at a time, and gives the loop back between steps (sleeping
as long as `log.cleaner.io.max.bytes.per.second` asks), so request handling is never held
for more than one step; it sleeps `log.cleaner.backoff.ms` when no log is due. Two workers
never clean the same log; a round the log overtook (truncation, deletion, retention) is
dropped and retried later; a round that fails otherwise marks the partition uncleanable
until restart (Kafka's `uncleanable-partitions-count`), with one log line.

`may_clean(tp)` is asked before a log is picked: the node answers False for a KIP-1279
mirror partition that is still read-only (see docs/design/storage.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kmirror.log.cleaner.config import CleanerConfig
from kmirror.log.cleaner.manager import LogCleanerManager
from kmirror.log.cleaner.swap import CleaningAborted
from kmirror.log.cleaner.throttler import Throttler
from kmirror.log.log_manager import LogManager
from kmirror.ports import Clock
from kmirror.types import TopicPartition

if TYPE_CHECKING:
    from kmirror.log.cleaner.offset_map import OffsetMap
    from kmirror.log.segment import LogSegment

log = logging.getLogger("kmirror.log_cleaner")

STEP_BYTES = 64 * 1024


class LogCleanerService:
    def __init__(self, config: CleanerConfig, log_manager: LogManager, clock: Clock,
                 may_clean: Callable[[TopicPartition], bool] = lambda tp: True) -> None:
        self.config = config
        self.log_manager = log_manager
        self.clock = clock
        self.may_clean = may_clean
        self.manager = LogCleanerManager(log_manager.fs)
        self.rounds_completed = 0
        self._last_round: dict[str, float] = {}
        self._last_run_ms = clock.monotonic_ms()
        self._tasks: list[asyncio.Task[None]] = []
        self._warm_up: asyncio.Future[None] | None = None
        self._throttler = Throttler(config.max_io_bytes_per_second, clock.monotonic_ms())

    def start(self) -> None:
        if not self.config.enable_cleaner:
            return
        loop = asyncio.get_running_loop()
        # The compiled record scans load (or compile) off the loop, once, before any round.
        self._warm_up = loop.run_in_executor(None, _load_compiled_cleaner)
        self._warm_up.add_done_callback(_on_warm_up)
        for i in range(self.config.num_threads):
            self._tasks.append(loop.create_task(self._run(i), name=f"kafka-log-cleaner-thread-{i}"))

    async def stop(self) -> None:
        if self._warm_up is not None:  # a load still running must not log after the node stopped
            self._warm_up.remove_done_callback(_on_warm_up)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._tasks.clear()

    def cleaner_metrics(self) -> dict[str, float]:
        """Kafka's LogCleaner / LogCleanerManager gauges (see metrics.cleaner_metrics)."""
        dead = sum(1 for t in self._tasks if t.done())
        return {
            "max-buffer-utilization-percent": 0.0, "cleaner-recopy-percent": 0.0, "max-clean-time-secs": 0.0,
            "max-compaction-delay-secs": 0.0, **self._last_round,
            "uncleanable-partitions-count": float(len(self.manager.uncleanable)),
            "time-since-last-run-ms": float(self.clock.monotonic_ms() - self._last_run_ms),
            "DeadThreadCount": float(dead),
        }

    async def _run(self, thread: int) -> None:
        try:
            if self._warm_up is not None:
                await asyncio.shield(self._warm_up)
        except Exception:  # the first round compiles what it needs instead
            log.exception("loading the log cleaner's compiled functions failed")
        from kmirror.log.cleaner.offset_map import OffsetMap  # loaded by _load_compiled_cleaner

        offset_map = OffsetMap(self.config.dedupe_buffer_size_per_thread, self.config.dedupe_buffer_load_factor)
        while True:
            cleaned = False
            try:
                cleaned = await self._clean_filthiest_log(offset_map)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log cleaner thread %d failed", thread)
            if not cleaned:
                await asyncio.sleep(self.config.backoff_ms / 1000)

    async def _clean_filthiest_log(self, offset_map: OffsetMap) -> bool:
        from kmirror.log.cleaner.cleaning import LogCleaning  # loaded by _load_compiled_cleaner

        manager = self.log_manager
        logs = [(lg, manager.log_dir_of(lg.topic_partition) or "") for lg in manager.all_logs()]
        now = self.clock.now_ms()
        target = self.manager.grab_filthiest_log(logs, now, self.may_clean)
        if target is None:
            self._last_run_ms = self.clock.monotonic_ms()
            return False
        tp = target.log.topic_partition
        cleaning = LogCleaning(target.log, target.first_dirty_offset, target.first_uncleanable_offset, now, offset_map,
                               io_buffer_size=self.config.io_buffer_size, step_bytes=STEP_BYTES,
                               defer_deletes=True)
        steps = cleaning.run()
        try:
            for step_bytes in steps:
                pause_ms = self._throttler.pause_ms(step_bytes, self.clock.monotonic_ms())
                await asyncio.sleep(pause_ms / 1000)
        except CleaningAborted as aborted:
            log.info("cleaning of %s abandoned: %s", tp, aborted)
            self.manager.abort_cleaning(tp)
            return True
        except asyncio.CancelledError:
            self.manager.abort_cleaning(tp)
            raise
        except Exception:
            if target.log.closed or manager.get_log(tp) is not target.log:
                self.manager.abort_cleaning(tp)  # the log was deleted under the round
                return True
            log.exception("cleaning of %s failed; the partition is marked uncleanable", tp)
            self.manager.mark_uncleanable(tp)
            return True
        finally:
            steps.close()  # a stopped round removes its partial .cleaned files
            if cleaning.replaced:  # Kafka deletes replaced segments after file.delete.delay.ms
                asyncio.get_running_loop().call_later(
                    target.log.config.file_delete_delay_ms / 1000, _delete_segments, list(cleaning.replaced))
        log_dir = manager.log_dir_of(tp)
        if log_dir is not None:
            live = [tp2 for tp2 in manager.logs if manager.log_dir_of(tp2) == log_dir]
            self.manager.done_cleaning(target.log, log_dir, cleaning.end_offset, now,
                                       cleaning.latest_delete_horizon_ms, live)
        else:
            self.manager.abort_cleaning(tp)
        stats = cleaning.stats
        self.rounds_completed += 1
        self._last_run_ms = self.clock.monotonic_ms()
        self._last_round = {
            "max-buffer-utilization-percent": stats.buffer_utilization * 100,
            "cleaner-recopy-percent": 100.0 * stats.bytes_written / stats.bytes_read if stats.bytes_read else 0.0,
            "max-clean-time-secs": (self.clock.now_ms() - now) / 1000,
            "max-compaction-delay-secs": target.max_compaction_delay_ms / 1000,
        }
        log.info("cleaned %s up to offset %d: read %d bytes (%d records), wrote %d bytes (%d records), "
                 "%d segments swapped", tp, cleaning.end_offset, stats.bytes_read, stats.messages_read,
                 stats.bytes_written, stats.messages_written, stats.segments_swapped)
        return True


def _delete_segments(segments: list[LogSegment]) -> None:
    for segment in segments:
        try:
            segment.delete()
        except OSError:
            log.exception("deleting %s failed (the log's next load removes it)", segment.log_path)


def _on_warm_up(loaded: asyncio.Future[None]) -> None:
    if not loaded.cancelled() and loaded.exception() is None:  # a failure is logged by each cleaner thread
        log.info("log cleaner's compiled functions loaded")


def _load_compiled_cleaner() -> None:
    """Import the cleaner's compiled modules and load their functions (run in a thread).
    Imported here, not at the top: numba's import and the load take about a second that a
    node's start, and a node with the cleaner disabled, need not wait for."""
    from kmirror.log.cleaner.warm_up import warm_up

    warm_up()
