"""A log directory that fails a read or a write goes offline, and the node goes on serving its
other directories (KIP-858, Kafka's `LogDirFailureChannel` and `ReplicaManager.handleLogDirFailure`).

What counts as a failed directory: an `OSError` whose errno says the storage itself refused
(`STORAGE_ERRNOS`: the disk is full or over quota, the file system went read-only after an
error, an I/O error, a file past the size limit, or a path under the directory that is no
longer a directory: the directory was replaced or unmounted under the node), or a missing
file in a log directory that is itself gone (not a directory any more). A missing file in a
directory still there is not one: the log layer expects those where a segment was deleted
under a read.

The failed operation raises `KafkaStorageError` (its partition answers KAFKA_STORAGE_ERROR);
`on_offline` takes the directory offline on the event loop (`OfflineLogDirs`): its logs are
dropped without a flush, its partitions are offline on this node, and the next heartbeat
tells the controller, which moves their leaderships and ISR memberships to other replicas.
A torn tail a failed write left stays in the directory: the node's next start recovers it
(its logs were not closed cleanly), so nothing is appended after it meanwhile.

A directory that cannot be created, read or recovered while the node loads its logs is offline
from the start (`load_failed`, Kafka's `LogManager.loadLogs`): the node registers without it.

The node halts (`Exit.halt(1)` in Kafka) when the failed directory holds the metadata log (the
first of `log.dirs`) or when no other directory is online: a partition's leadership then moves
to an in-sync replica as after any broker failure, so nothing acknowledged is lost
(docs/design/storage.md).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import NoReturn

from kmirror.log.fs import KafkaStorageError
from kmirror.log.log_manager import LogManager
from kmirror.replication.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

STORAGE_ERRNOS = frozenset({errno.EIO, errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.ENOTDIR})


def is_storage_failure(exc: OSError) -> bool:
    return exc.errno in STORAGE_ERRNOS


def hand_over(exc: OSError, path: str, on_failure: Callable[[str, OSError], NoReturn] | None) -> NoReturn:
    """`exc`, raised while accessing `path`: a storage failure, or a missing file (its log dir
    may be gone), goes to `on_failure` (which raises KafkaStorageError, halts, or raises `exc`
    again); anything else, or any error without a handler, is raised again."""
    if on_failure is None or not (is_storage_failure(exc) or exc.errno == errno.ENOENT):
        raise exc
    on_failure(path, exc)


class LogDirFailureHandler:
    """Called with the path an operation failed on and its error: the directory goes offline
    (`on_offline`, once the broker serves) and the operation raises KafkaStorageError, or the
    node halts."""

    def __init__(self, log_dirs: Sequence[str], halt: Callable[[int], object] = os._exit) -> None:
        self.log_dirs = [d.rstrip("/") for d in log_dirs]
        self._halt = halt
        self.offline: set[str] = set()
        self.on_offline: Callable[[str], None] | None = None
        """Set once the broker serves: takes a failed directory offline (from any thread); the
        directories that failed before are taken offline when it is set (`serve_log_dirs`)."""
        self._lock = threading.Lock()

    def dir_of(self, path: str) -> str:
        """The log directory `path` lies in (the longest one that holds it), else `path`'s own."""
        holders = [d for d in self.log_dirs if path == d or path.startswith(d + "/")]
        return max(holders, key=len) if holders else os.path.dirname(path)

    def __call__(self, path: str, exc: OSError) -> NoReturn:
        log_dir = self.dir_of(path)
        if exc.errno == errno.ENOENT and (log_dir not in self.log_dirs or os.path.isdir(log_dir)):
            raise exc  # a file deleted under a read, in a log dir still there
        if self._went_offline(log_dir, f"Error while accessing {path} in dir {log_dir}: {exc}", serving=True):
            if self.on_offline is not None:
                self.on_offline(log_dir)
        raise KafkaStorageError(log_dir, f"{path}: {exc}")

    def load_failed(self, log_dir: str, exc: Exception) -> None:
        """`log_dir` could not be loaded (`LogManager.load_logs`): offline from the start."""
        self._went_offline(log_dir, f"Error while loading log dir {log_dir}: {exc}", serving=False)

    def _went_offline(self, log_dir: str, error: str, serving: bool) -> bool:
        """`log_dir` is offline now; False if it was before. Halts instead when it was the last
        one online or holds the metadata log. Kafka's lines, in Kafka's order."""
        with self._lock:
            if log_dir in self.offline:
                return False
            log.error(error)
            last = all(d in self.offline or d == log_dir for d in self.log_dirs)
            if not last and (log_dir == self.log_dirs[0] or log_dir not in self.log_dirs):
                self._stop(f"Shutdown broker because the metadata log dir {log_dir} has failed")
            if serving:
                log.error("Stopping serving replicas in dir %s", log_dir)
            if last:
                self._stop(f"Shutdown broker because all log dirs in {', '.join(self.log_dirs)} have failed")
            self.offline.add(log_dir)
            return True

    def _stop(self, reason: str) -> NoReturn:
        log.critical(reason)
        for handler in logging.getLogger().handlers:
            try:
                handler.flush()
            except Exception:  # the log may be on the failed disk: halt all the same
                pass
        self._halt(1)
        raise SystemExit(1)  # reached only when `halt` returns (tests)


class OfflineLogDirs:
    """Takes a failed log directory offline on the event loop (Kafka's
    `ReplicaManager.handleLogDirFailure`): its logs leave the log manager, its partitions are
    offline in the replica manager (their fetchers stop), moves to or from it stop, and
    `report` sends a heartbeat naming it."""

    def __init__(self, loop: asyncio.AbstractEventLoop, log_manager: LogManager, replica_manager: ReplicaManager,
                 report: Callable[[], None], node_id: int) -> None:
        self._loop = loop
        self._log_manager = log_manager
        self._replica_manager = replica_manager
        self._report = report
        self._node_id = node_id

    def __call__(self, log_dir: str) -> None:
        self._loop.call_soon_threadsafe(self._take_offline, log_dir)

    def _take_offline(self, log_dir: str) -> None:
        partitions = self._log_manager.take_dir_offline(log_dir)
        self._replica_manager.take_offline(partitions)
        if partitions:
            log.error("Broker %d stopped serving partitions %s because they are in the failed log directory %s",
                      self._node_id, ",".join(sorted(str(tp) for tp in partitions)), log_dir)
        self._report()
