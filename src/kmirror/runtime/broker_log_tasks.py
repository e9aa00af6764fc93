"""A broker's periodic work on its logs, as Kafka's `LogManager` schedules it: the log cleaner,
retention (`kafka-log-retention`), recovery-point checkpoints, flushes, the expiration of
producer ids and the removal of deleted logs' directories, plus the load of the compiled record
walk that produce validation uses."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kmirror.config.server import ServerConfig
from kmirror.log.cleaner.config import CleanerConfig
from kmirror.log.log_manager import LogManager
from kmirror.metadata.config_description import broker_config_entry
from kmirror.metadata.image import MetadataImage
from kmirror.metrics.cleaner_metrics import register_cleaner_metrics
from kmirror.metrics.registry import MetricsRegistry
from kmirror.ports import Clock
from kmirror.records import record_walk
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.runtime.log_cleaner import LogCleanerService
from kmirror.runtime.scheduler import Scheduler
from kmirror.types import TopicPartition

log = logging.getLogger("kmirror.node")

RECOVERY_POINT_CHECKPOINT_INTERVAL_MS = 60_000


def _on_record_walk_loaded(loaded: asyncio.Future[None]) -> None:
    if loaded.cancelled():
        return
    if (error := loaded.exception()) is not None:
        log.error("loading the compiled record walk failed; produce validation keeps the Python walk",
                  exc_info=error)
    else:
        log.info("compiled record walk loaded: produce validation walks records compiled")


class BrokerLogTasks:
    def __init__(self, config: ServerConfig, clock: Clock, scheduler: Scheduler, log_manager: LogManager,
                 replica_manager: ReplicaManager, image: Callable[[], MetadataImage],
                 moving: Callable[[TopicPartition], bool] = lambda tp: False) -> None:
        self._config = config
        self._clock = clock
        self._scheduler = scheduler
        self._logs = log_manager
        self._replica_manager = replica_manager
        self._image = image
        self._moving = moving
        self._checkpoint_write: asyncio.Future[None] | None = None
        self._walk_load: asyncio.Future[None] | None = None
        self.cleaner = LogCleanerService(CleanerConfig.from_values(config.values), log_manager, clock, self._may_clean)

    def _may_clean(self, tp: TopicPartition) -> bool:
        """A mirror partition that is still read-only is not cleaned here: it stays a
        byte-identical copy of its source (docs/design/storage.md). Nor is a log moving to
        another log dir (AlterReplicaLogDirs)."""
        if self._moving(tp):
            return False
        guard = self._replica_manager.write_guard
        return guard is None or guard.write_refusal(tp) is None

    async def _checkpoint(self, high_watermarks_only: bool = False) -> None:
        """The offsets are read on the loop, the files (one line per partition, fsync'd) are
        written on a worker thread; `stop` waits for a write in flight before the last one."""
        if self._checkpoint_write is not None and not self._checkpoint_write.done():
            await asyncio.wait([self._checkpoint_write])  # one write at a time: never an older one last
        snapshot = self._logs.checkpoint_snapshot(high_watermarks_only=high_watermarks_only)
        self._checkpoint_write = asyncio.ensure_future(asyncio.to_thread(self._logs.write_checkpoints, snapshot))
        await asyncio.shield(self._checkpoint_write)

    async def _remove_deleted_dirs(self) -> None:
        await asyncio.to_thread(self._logs.remove_deleted_dirs)

    def _remove_expired_producers(self) -> None:
        """With the current `producer.id.expiration.ms` (a dynamic broker config); run once
        on the loaded logs first, as Kafka skips expired producers when it loads a log."""
        expiration = broker_config_entry(self._image(), self._config, "producer.id.expiration.ms").value
        self._logs.remove_expired_producers(self._clock.now_ms(), int(str(expiration)))

    def start(self, metrics: MetricsRegistry) -> None:
        cfg, clock, logs, scheduler = self._config, self._clock, self._logs, self._scheduler
        self.cleaner.start()
        # Produce validation walks the records of compressed batches in Python until this is loaded
        self._walk_load = asyncio.get_running_loop().run_in_executor(None, record_walk.load_compiled)
        self._walk_load.add_done_callback(_on_record_walk_loaded)
        register_cleaner_metrics(metrics, self.cleaner.cleaner_metrics)
        scheduler.schedule("kafka-log-retention", lambda: logs.run_retention(clock.now_ms()),
                           cfg.log_retention_check_interval_ms)
        scheduler.schedule_async("kafka-recovery-point-checkpoint", self._checkpoint,
                                 RECOVERY_POINT_CHECKPOINT_INTERVAL_MS)
        scheduler.schedule_async("highwatermark-checkpoint", lambda: self._checkpoint(high_watermarks_only=True),
                                 int(cfg.get("replica.high.watermark.checkpoint.interval.ms")))
        scheduler.schedule("kafka-log-flusher", lambda: logs.flush_dirty(clock.now_ms()), 1000)
        self._remove_expired_producers()
        scheduler.schedule("PeriodicProducerExpirationCheck", self._remove_expired_producers,
                           int(cfg.get("producer.id.expiration.check.interval.ms")))
        logs.defer_removal = True  # deleted logs' directories go on a worker thread
        scheduler.schedule_async("kafka-delete-logs", self._remove_deleted_dirs, 1000)

    async def stop(self) -> None:
        """The cleaner stopped; a load of the compiled walk still running is no longer
        awaited (its thread ends on its own, and the node says nothing of it once stopped)."""
        await self.cleaner.stop()
        if self._walk_load is not None:
            self._walk_load.cancel()

    async def checkpoint_written(self) -> None:
        """A checkpoint write in flight has ended (the node's last one follows at close)."""
        if self._checkpoint_write is not None:
            await asyncio.wait([self._checkpoint_write])
