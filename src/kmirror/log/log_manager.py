"""All partition logs of a node under `log.dirs` (Kafka `LogManager`).

Each log dir holds `<topic>-<partition>/` directories plus the checkpoints
`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint` and
`replication-offset-checkpoint` (high watermarks). `__cluster_metadata-0` belongs to the
metadata layer and is never loaded here. A deleted log's directory is first renamed to
`<topic>-<partition>.<id>-delete` (so a crash mid-delete never reloads it), then removed;
leftover `-delete` directories are removed at load.

A log being moved to another log dir (AlterReplicaLogDirs, `log.future_logs`) has a future
log there, `<topic>-<partition>.<id>-future`, which takes the place of the current one once
it has caught up (`replace_with_future`). A log dir that fails (KIP-858) is taken offline
(`take_dir_offline`): its logs are dropped unflushed, no new log goes there, its checkpoints
are no longer written, and while a dir is offline a log that is not new (the controller knows
its directory) is not created elsewhere (Kafka's `LogManager.getOrCreateLog`), since it may
be in the failed dir. A future log a restart left is loaded with its
partition and its move goes on (`futures`); one without its partition is removed. A partition found in two log dirs (a
crash between the two renames of a replacement, which hold the same records) keeps the
longer log, and the other is deleted.

Crash safety: logs live in the page cache until flushed; a killed process loses nothing.
After a machine crash the checkpointed recovery point bounds the rescan done by `Log.open`.
"""

from __future__ import annotations

import logging
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable
from uuid import UUID

from kmirror.log.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpoint,
)
from kmirror.log.config import LogConfig
from kmirror.log.fs import FileSystem, KafkaStorageError, join
from kmirror.log.log import Log
from kmirror.log.producer_state import PRODUCER_ID_EXPIRATION_MS
from kmirror.ports import Clock
from kmirror.types import TopicPartition

logger = logging.getLogger(__name__)

METADATA_PARTITION_DIR = "__cluster_metadata-0"
DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"


def parse_partition_dir(name: str) -> TopicPartition | None:
    """`<topic>-<partition>` -> TopicPartition; None for anything else (`-delete`,
    `-future`, `-stray` directories, files)."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit() or "." in partition:
        return None
    return TopicPartition(topic, int(partition))


class LogManager:
    def __init__(self, fs: FileSystem, log_dirs: list[str], clock: Clock, default_config: LogConfig,
                 *, config_for: Callable[[TopicPartition], LogConfig] | None = None) -> None:
        self.fs = fs
        self.log_dirs = list(log_dirs)
        self.clock = clock
        self.default_config = default_config
        self._config_for = config_for
        self.logs: dict[TopicPartition, Log] = {}
        self.producer_id_expiration_ms = PRODUCER_ID_EXPIRATION_MS  # the last value the node gave
        self._dir_of: dict[TopicPartition, str] = {}
        self._delete_counter = 0
        self.defer_removal = False
        self._to_remove: list[str] = []
        self._per_dir: Counter[str] = Counter()
        self.cordoned: Callable[[], Collection[str]] = tuple
        self.preferred_dirs: dict[TopicPartition, str] = {}
        """Where a replica not hosted yet goes when its log is created (AlterReplicaLogDirs before
        the replica exists, Kafka's `maybeUpdatePreferredLogDir`); not kept across restarts."""
        self.futures: dict[TopicPartition, tuple[str, Log]] = {}
        """Moves between log dirs a restart interrupted (log dir, future log): the node's mover
        takes them on (`runtime.log_dir_mover`)."""
        """The log directories cordoned now (KIP-1066): no new log goes there."""
        # logs whose topic id or directory is not durable yet (`flush_new_logs`); a deque, as
        # the loop appends while a worker thread takes
        self._new_logs: deque[Log] = deque()
        self.offline_dirs: set[str] = set()
        """Log dirs that failed (KIP-858): nothing is read or written there any more."""

    # -- load -------------------------------------------------------------------------------

    def load_logs(self, dir_failed: Callable[[str, Exception], None] | None = None) -> None:
        """Load every log dir's logs. With `dir_failed`, a dir that cannot be created, read or
        recovered (KIP-858: an I/O error, a file where the dir should be) is offline and the
        others load (Kafka's `LogManager.loadLogs`); `dir_failed` is told, and may refuse by
        raising. Without it, the error is raised."""
        futures: list[tuple[str, str, str]] = []
        for log_dir in self.log_dirs:
            try:
                self._load_dir(log_dir, futures)
            except (OSError, KafkaStorageError) as exc:
                if dir_failed is None:
                    raise
                dir_failed(log_dir, exc)
                self.take_dir_offline(log_dir)
        for log_dir, path, name in futures:
            if log_dir not in self.offline_dirs:
                self._load_future(log_dir, path, name)

    def _load_dir(self, log_dir: str, futures: list[tuple[str, str, str]]) -> None:
        self.fs.mkdirs(log_dir)
        recovery = OffsetCheckpoint(self.fs, log_dir, RECOVERY_POINT_CHECKPOINT).read()
        starts = OffsetCheckpoint(self.fs, log_dir, LOG_START_OFFSET_CHECKPOINT).read()
        hws = OffsetCheckpoint(self.fs, log_dir, REPLICATION_OFFSET_CHECKPOINT).read()
        for name in self.fs.listdir(log_dir):
            path = join(log_dir, name)
            if not self.fs.is_dir(path) or name == METADATA_PARTITION_DIR:
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                self.fs.delete(path)
                continue
            if name.endswith(FUTURE_DIR_SUFFIX):
                futures.append((log_dir, path, name))
                continue
            tp = parse_partition_dir(name)
            if tp is None:
                continue
            config = self._config_for(tp) if self._config_for is not None else self.default_config
            loaded = Log.open(self.fs, path, tp, config, self.clock, recovery_point=recovery.get(tp, 0),
                              log_start_offset=starts.get(tp, 0), high_watermark=hws.get(tp))
            other = self.logs.get(tp)
            if other is not None:
                keep_other = other.log_end_offset >= loaded.log_end_offset
                logger.warning("%s is in two log dirs (%s, %s): keeping the one ending at %d, deleting the other",
                               tp, other.directory, loaded.directory,
                               max(other.log_end_offset, loaded.log_end_offset))
                if keep_other:
                    loaded.close()
                    loaded.delete()
                    continue
                self.delete_logs([tp])
            self._register(loaded, log_dir)

    def _load_future(self, log_dir: str, path: str, name: str) -> None:
        """A move a restart interrupted goes on (`futures`) when its partition's current log is
        here under the same topic id; else its future log is removed."""
        tp = parse_partition_dir(name.rsplit(".", 1)[0])
        current = self.logs.get(tp) if tp is not None else None
        if tp is None or current is None or self._dir_of.get(tp) == log_dir or tp in self.futures:
            logger.warning("removing %s: no partition here to move to %s", path, log_dir)
            self.fs.delete(path)
            return
        future = Log.open(self.fs, path, tp, current.config, self.clock)
        if future.topic_id is not None and future.topic_id != current.topic_id:
            logger.warning("removing %s: its topic id is not the partition's", path)
            future.close()
            future.delete()
            return
        future.topic_id = current.topic_id
        logger.info("resuming the move of %s to %s at offset %d", tp, log_dir, future.log_end_offset)
        self.futures[tp] = (log_dir, future)

    def _register(self, log: Log, log_dir: str) -> None:
        log.on_log_start_offset_change = self._on_log_start_offset_change
        log.producer_id_expiration_ms = self.producer_id_expiration_ms
        self.logs[log.topic_partition] = log
        self._dir_of[log.topic_partition] = log_dir
        self._per_dir[log_dir] += 1
        if log.partition_metadata.dirty:
            self._new_logs.append(log)

    def flush_new_logs(self, stop: Callable[[], bool] = lambda: False) -> int:
        """Make new logs' topic ids and directories durable (`PartitionMetadataFile.maybe_flush`);
        safe on a worker thread. Returns how many logs were flushed; stops early once `stop()`
        is true (`close` flushes the rest)."""
        flushed = 0
        parents: set[str] = set()
        try:
            while self._new_logs and not stop():
                parent = self._new_logs.popleft().partition_metadata.maybe_flush(sync_parent=False)
                if parent is not None:
                    parents.add(parent)
                flushed += 1
        finally:
            for parent in parents:
                self.fs.sync_dir(parent)
        return flushed

    @property
    def has_new_logs(self) -> bool:
        return bool(self._new_logs)

    # -- partitions -------------------------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self.logs.get(tp)

    def get_or_create_log(self, tp: TopicPartition, topic_id: UUID | None = None,
                          config: LogConfig | None = None, *, is_new: bool = True) -> Log:
        """`is_new`: the replica's log cannot be in a failed dir (the controller placed it in no
        dir yet, or in one online here: `MetadataImage.is_new_replica`); one that may be there
        is not created anew while a log dir is offline (KafkaStorageError)."""
        log = self.logs.get(tp)
        if log is not None:
            if config is not None:
                log.config = config
            if topic_id is not None and log.topic_id is None:
                log.topic_id = topic_id
            return log
        if not is_new and self.offline_dirs:
            raise KafkaStorageError(", ".join(sorted(self.offline_dirs)),
                                    f"cannot create the log of {tp}: it may be there")
        log_dir = self.preferred_dirs.pop(tp, None) or self._next_log_dir()
        log = Log.open(self.fs, join(log_dir, tp.dir_name), tp, config or self.default_config, self.clock,
                       topic_id)
        self._register(log, log_dir)
        return log

    def create_future_log(self, tp: TopicPartition, log_dir: str, future_id: str) -> Log:
        """An empty log for `tp` in `log_dir`, to be filled with the current log's batches and
        then to replace it (`replace_with_future`)."""
        current = self.logs[tp]
        path = join(log_dir, f"{tp.dir_name}.{future_id}{FUTURE_DIR_SUFFIX}")
        future = Log.open(self.fs, path, tp, current.config, self.clock, current.topic_id)
        future.truncate_fully_and_start_at(current.log_start_offset)
        return future

    def replace_with_future(self, future: Log, log_dir: str) -> Log:
        """The future log of a partition, caught up with the current one (same log end),
        renamed into place in `log_dir`; the current log is deleted. Returns the log now
        serving the partition: the future one, opened again under its final name, with the
        current one's log start and high watermark."""
        tp = future.topic_partition
        current = self.logs[tp]
        if future.log_end_offset != current.log_end_offset:
            raise ValueError(f"future log of {tp} ends at {future.log_end_offset}, the current one at "
                             f"{current.log_end_offset}")
        log_start, high_watermark = current.log_start_offset, current.high_watermark
        future.partition_metadata.maybe_flush()
        future.close()  # flushed, with its epoch checkpoint and producer snapshot
        final = join(log_dir, tp.dir_name)
        self.fs.rename(future.directory, final)
        self.fs.sync_dir(log_dir)
        self.delete_logs([tp])
        replaced = Log.open(self.fs, final, tp, future.config, self.clock, future.topic_id,
                            recovery_point=future.log_end_offset, log_start_offset=log_start,
                            high_watermark=high_watermark)
        self._register(replaced, log_dir)
        self._write_checkpoints([log_dir])
        return replaced

    def _next_log_dir(self) -> str:
        """Kafka places a new log in the dir holding the fewest partitions, of those not
        cordoned; when all are, in the first (Kafka's LogManager.nextLogDirs: the controller may
        have placed the replica here just before the last directory was cordoned)."""
        cordoned = self.cordoned()
        online = self.online_dirs
        if not online:
            raise KafkaStorageError(", ".join(self.log_dirs))
        candidates = [d for d in online if d not in cordoned] or online[:1]
        return min(candidates, key=lambda d: self._per_dir[d])

    @property
    def online_dirs(self) -> list[str]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def take_dir_offline(self, log_dir: str) -> list[TopicPartition]:
        """`log_dir` failed: its logs (and the moves to or from it) are dropped without a
        flush, their handles closed; returns the partitions whose log was there."""
        self.offline_dirs.add(log_dir)
        gone = [tp for tp, d in self._dir_of.items() if d == log_dir]
        for tp in gone:
            log = self.logs.pop(tp)
            del self._dir_of[tp]
            self._per_dir[log_dir] -= 1
            log.closed = True
            for segment in log.segments:
                for path in (segment.log_path, segment.offset_index.path, segment.time_index.path):
                    self.fs.close(path)
        for tp, (future_dir, future) in list(self.futures.items()):
            if future_dir == log_dir or tp in gone:
                del self.futures[tp]
                future.closed = True
        self.preferred_dirs = {tp: d for tp, d in self.preferred_dirs.items() if d != log_dir}
        self._new_logs = deque(log for log in self._new_logs if not log.closed)
        return gone

    def log_dir_of(self, tp: TopicPartition) -> str | None:
        return self._dir_of.get(tp)

    def all_logs(self) -> list[Log]:
        return list(self.logs.values())

    def delete_log(self, tp: TopicPartition) -> bool:
        return bool(self.delete_logs([tp]))

    def delete_logs(self, tps: Iterable[TopicPartition]) -> list[TopicPartition]:
        """Delete these logs (renamed to `*-delete`, then removed) and write each affected log
        dir's checkpoints once: deleting a topic of N partitions costs N renames, not N
        rewrites of checkpoints listing every partition. Returns the logs deleted.

        With `defer_removal` the renamed directories are removed later by
        `remove_deleted_dirs` (the runtime runs it on a worker thread, as Kafka removes
        `-delete` directories in the background); one left by a crash is removed on start."""
        deleted: list[TopicPartition] = []
        dirs: set[str] = set()
        moves: list[tuple[str, str]] = []
        for tp in tps:
            log = self.logs.pop(tp, None)
            log_dir = self._dir_of.pop(tp, None)
            if log is None or log_dir is None:
                continue
            self._per_dir[log_dir] -= 1
            log.partition_metadata.close()
            for segment in log.segments:
                for path in (segment.log_path, segment.offset_index.path, segment.time_index.path):
                    self.fs.close(path)
            while True:
                self._delete_counter += 1
                renamed = join(log_dir, f"{tp.dir_name}.{self._delete_counter:032x}{DELETE_DIR_SUFFIX}")
                if not self.fs.exists(renamed):
                    break
            moves.append((log.directory, renamed))
            log.closed = True
            dirs.add(log_dir)
            deleted.append(tp)
        self.fs.rename_all(moves)  # one fsync per log dir, not one per partition
        for _, renamed in moves:
            if self.defer_removal:
                self._to_remove.append(renamed)
            else:
                self.fs.delete(renamed)
        if dirs:
            self._write_checkpoints(sorted(dirs))
        return deleted

    def remove_deleted_dirs(self) -> int:
        """Remove the directories of logs deleted with `defer_removal`; safe on a worker thread
        (nothing else refers to a renamed directory)."""
        removed = 0
        while self._to_remove:
            self.fs.delete(self._to_remove.pop())
            removed += 1
        return removed

    # -- background work --------------------------------------------------------------------

    def checkpoint_recovery_points(self) -> None:
        """Write every online log dir's recovery-point, log-start-offset and high watermark checkpoints."""
        self._write_checkpoints(self.online_dirs)

    def _write_checkpoints(self, log_dirs: Iterable[str]) -> None:
        self.write_checkpoints(self.checkpoint_snapshot(log_dirs))

    def checkpoint_snapshot(self, log_dirs: Iterable[str] | None = None, *, high_watermarks_only: bool = False
                            ) -> list[tuple[str, str, dict[TopicPartition, int]]]:
        """The offsets the checkpoints of `log_dirs` (default: all online) would hold now, as
        (log dir, checkpoint name, offsets): taken where the logs change, written by
        `write_checkpoints` elsewhere (a worker thread: ten thousand partitions' fsync'd files).
        `high_watermarks_only`: the replication-offset-checkpoint alone (Kafka writes it every
        `replica.high.watermark.checkpoint.interval.ms`, the others every minute)."""
        out: list[tuple[str, str, dict[TopicPartition, int]]] = []
        for log_dir in self.online_dirs if log_dirs is None else log_dirs:
            if log_dir in self.offline_dirs:
                continue
            # list(): one copy, taken atomically, while a worker thread may be creating logs
            logs = [log for tp, log in list(self.logs.items()) if self._dir_of.get(tp) == log_dir]
            if not high_watermarks_only:
                out.append((log_dir, RECOVERY_POINT_CHECKPOINT,
                            {log.topic_partition: log.recovery_point for log in logs}))
                out.append((log_dir, LOG_START_OFFSET_CHECKPOINT,
                            {log.topic_partition: log.log_start_offset for log in logs if log.log_start_offset > 0}))
            out.append((log_dir, REPLICATION_OFFSET_CHECKPOINT,
                        {log.topic_partition: log.high_watermark for log in logs}))
        return out

    def write_checkpoints(self, snapshot: list[tuple[str, str, dict[TopicPartition, int]]]) -> None:
        """A dir failing meanwhile is skipped (its failure is already reported and takes it
        offline); the other dirs' checkpoints are still written."""
        for log_dir, name, offsets in snapshot:
            try:
                OffsetCheckpoint(self.fs, log_dir, name).write(offsets)
            except KafkaStorageError:
                continue

    def _on_log_start_offset_change(self, log: Log) -> None:
        log_dir = self._dir_of.get(log.topic_partition)
        if log_dir is not None:
            self._write_checkpoints([log_dir])

    def run_retention(self, now_ms: int) -> int:
        """Delete segments past retention in every log; returns how many were deleted."""
        return sum(log.delete_old_segments(now_ms) for log in list(self.logs.values()))

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Kafka's periodic `UnifiedLog.removeExpiredProducers` on every log, with the current
        `producer.id.expiration.ms`; returns how many producers went."""
        self.producer_id_expiration_ms = expiration_ms
        return sum(log.remove_expired_producers(now_ms, expiration_ms) for log in list(self.logs.values()))

    def flush_dirty(self, now_ms: int) -> int:
        """Flush logs whose flush.ms elapsed with unflushed data (flush.messages is applied
        on append); returns how many were flushed."""
        return sum(1 for log in list(self.logs.values()) if log.maybe_flush())

    def close(self) -> None:
        """Clean shutdown: flush and close every log, then write the checkpoints."""
        for log in self.logs.values():
            log.close()
        self._write_checkpoints(self.online_dirs)
