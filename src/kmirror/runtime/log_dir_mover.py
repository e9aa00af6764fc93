"""AlterReplicaLogDirs (KIP-113) on the node: each move asked for gets a future log in its
destination log dir, which a task on the event loop fills from the current log a step at a
time (`log.future_logs.copy_step`, 1 MiB a step) and puts in the current log's place once it
has caught up (`LogManager.replace_with_future`, then the partition serves from it). Kafka's
ReplicaAlterLogDirsThread, without its own thread: the copy and the replacement happen
between two requests of the loop, so nothing is appended in between.

A move is given up (its future log deleted) when the partition's log leaves the node (its
topic deleted, the replica reassigned away), when another destination is asked for (then that
one starts), and when the future log refuses a batch (logged). A move a restart interrupted
goes on from where its future log ends (`LogManager.futures`), once the partition is hosted. A
log dir asked for a replica not hosted yet is remembered (REPLICA_NOT_AVAILABLE is still the
answer, as Kafka's): the replica's log is created there if the broker gets it. The log
cleaner leaves a partition alone while it moves, and a replacement waits for a cleaning round
already under way.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from kmirror.log.fs import KafkaStorageError
from kmirror.log.future_logs import CopyQuota, FutureLog, FutureLogError, copy_step, offset_lag
from kmirror.log.log_manager import LogManager
from kmirror.metadata.controller.result import ApiError
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.runtime.broker_lifecycle import LogDirs
from kmirror.types import TopicPartition

log = logging.getLogger(__name__)

IDLE_PAUSE_S = 0.05
"""A pass that could only wait (a cleaning round under way) sleeps this long."""
MAX_PREFERRED_DIRS = 100_000
"""Log dirs remembered for replicas this broker does not host yet, at most."""


class LogDirMover:
    def __init__(self, log_manager: LogManager, replica_manager: ReplicaManager, log_dirs: LogDirs,
                 cleaning: Callable[[TopicPartition], bool]) -> None:
        self._logs = log_manager
        self._replicas = replica_manager
        self._log_dirs = log_dirs
        self._cleaning = cleaning
        self._quota = CopyQuota()
        self.moves: dict[TopicPartition, FutureLog] = {}
        self.on_moved: Callable[[TopicPartition], None] = lambda tp: None
        """Told each partition whose log was swapped into its new log dir."""
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- requests ---------------------------------------------------------------------------

    def alter(self, tp: TopicPartition, path: str) -> ApiError:
        """Kafka's ReplicaManager.alterReplicaLogDirs for one partition."""
        log_dir = self._log_dir(path)
        if log_dir is None:
            return ApiError(ErrorCode.log_dir_not_found, f"Log dir {path} is not found in the config.")
        if log_dir in self._log_dirs.cordoned():
            return ApiError(ErrorCode.invalid_replica_assignment, f"Log directory {log_dir} is cordoned")
        if log_dir in self._logs.offline_dirs:
            return ApiError(ErrorCode.kafka_storage_error, f"Log directory {log_dir} is offline")
        move = self.moves.get(tp)
        if move is not None and move.log_dir != log_dir:
            self._give_up(tp, f"another log dir, {log_dir}, was asked for")
        if self._replicas.get_partition(tp) is None or self._logs.get_log(tp) is None:
            preferred = self._logs.preferred_dirs  # where its log goes if this broker gets the replica
            preferred.pop(tp, None)
            preferred[tp] = log_dir
            if len(preferred) > MAX_PREFERRED_DIRS:  # bounded: the oldest wish goes
                del preferred[next(iter(preferred))]
            return ApiError(ErrorCode.replica_not_available, f"Replica of {tp} is not available on this broker")
        if self._logs.log_dir_of(tp) == log_dir or tp in self.moves:
            return ApiError(ErrorCode.none)
        self.moves[tp] = FutureLog(log_dir, self._logs.create_future_log(tp, log_dir, uuid.uuid4().hex))
        log.info("moving %s from %s to %s", tp, self._logs.log_dir_of(tp), log_dir)
        self._wake.set()
        return ApiError(ErrorCode.none)

    def _log_dir(self, path: str) -> str | None:
        wanted = os.path.normpath(path)
        return next((d for d in self._logs.log_dirs if os.path.normpath(d) == wanted), None)

    def futures(self) -> list[tuple[TopicPartition, str, int, int]]:
        """(partition, destination, size in bytes, offset lag) of each move under way."""
        out = []
        for tp, move in self.moves.items():
            current = self._logs.get_log(tp)
            lag = offset_lag(current, move.log) if current is not None else 0
            out.append((tp, move.log_dir, int(move.log.size_in_bytes), lag))
        return out

    # -- the task ---------------------------------------------------------------------------

    def start(self) -> None:
        """Takes on the moves a restart interrupted (`LogManager.futures`) first."""
        for tp, (log_dir, future) in self._logs.futures.items():
            self.moves[tp] = FutureLog(log_dir, future)
        self._logs.futures.clear()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        for move in self.moves.values():  # the next start takes the moves on
            move.log.close()

    async def _run(self) -> None:
        while True:
            if not self.moves:
                self._wake.clear()
                await self._wake.wait()
            waited = True
            for tp in list(self.moves):
                try:
                    copied = self._step(tp)
                except KafkaStorageError as e:  # a log dir failed under the swap
                    if tp in self.moves:
                        self._give_up(tp, str(e))
                    copied = 0
                waited &= copied is None
                await asyncio.sleep(self._quota.pause_s(
                    asyncio.get_running_loop().time(), copied or 0, self._log_dirs.move_rate()))
            if waited:
                await asyncio.sleep(IDLE_PAUSE_S)

    def _step(self, tp: TopicPartition) -> int | None:
        """One copy step of `tp`'s move, and its replacement once caught up: the bytes copied,
        None when it could only wait."""
        move = self.moves.get(tp)
        current = self._logs.get_log(tp)
        if move is None:
            return 0
        if current is None or current.topic_id != move.log.topic_id:
            self._give_up(tp, "the partition left this broker")
            return 0
        if self._replicas.get_partition(tp) is None:  # not hosted yet, after a restart
            return None
        try:
            before = move.log.size_bytes
            caught_up = copy_step(current, move.log)
            copied = max(move.log.size_bytes - before, 0)
            move.copied(copied)
        except (FutureLogError, OSError, KafkaStorageError) as e:
            self._give_up(tp, str(e))
            return 0
        if not caught_up:
            return copied
        if self._cleaning(tp):
            return None
        del self.moves[tp]
        source = self._logs.log_dir_of(tp)
        self._replicas.replace_log(tp, self._logs.replace_with_future(move.log, move.log_dir))
        log.info("moved %s from %s to %s (log end offset %d)", tp, source, move.log_dir, current.log_end_offset)
        self.on_moved(tp)
        return copied

    def _give_up(self, tp: TopicPartition, why: str) -> None:
        move = self.moves.pop(tp)
        log.warning("gave up moving %s to %s: %s", tp, move.log_dir, why)
        try:
            move.log.close()
            move.log.delete()
        except (OSError, KafkaStorageError) as e:  # its log dir failed: nothing to clean there
            log.warning("the future log of %s in %s was not removed: %s", tp, move.log_dir, e)
