"""The real `kmirror.log.fs.FileSystem` on the operating system's files.

One handle per file, opened on first use in read+append mode and kept until `close` or
until it is the least recently used of more than `max_open_files` open handles
(`log.max.open.files`): the handle is then closed and the file reopened on its next use.
Nothing lives in a handle but the descriptor (O_APPEND writes, `os.pread` reads, no seek
position), and `fsync` of a reopened file flushes the pages written through the closed one
(Linux syncs the inode), so closing one changes no result; it bounds the descriptors of a
node with many partitions (an idle partition's segment and index files) below the process
limit. The handles are used under one lock (logs are created on a worker thread, and a
handle closed by one thread must not be reused by another); fsyncs run outside it. Reads use `os.pread`. Writes go
to the page cache: a killed process loses nothing written, and `fsync` makes them durable
against a machine crash (Kafka's flush.messages/flush.ms default relies on the same).
Directory-changing operations fsync the parent directory so they survive a crash.

A read or write the storage refuses (`log_dir_failure.STORAGE_ERRNOS`: a full disk, an I/O
error) goes to `on_failure`, which halts the node (`kmirror.runtime.log_dir_failure`); without
one, the error is raised.
"""

from __future__ import annotations

import os
import resource
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from functools import wraps
from typing import Concatenate, NoReturn, ParamSpec, TypeVar

from kmirror.log.fs import Buffer
from kmirror.runtime.log_dir_failure import hand_over, is_storage_failure

P = ParamSpec("P")
R = TypeVar("R")

# descriptors left for connections, checkpoints and the metadata log
RESERVED_FDS = 4096


def default_max_open_files() -> int:
    """`log.max.open.files` -1: the process's file descriptor limit less `RESERVED_FDS`, or
    half of a limit below twice that (the rest for connections, checkpoints and the
    metadata log)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 20 if soft == resource.RLIM_INFINITY else max(16, soft // 2, soft - RESERVED_FDS)


def _storage_op(method: Callable[Concatenate[OsFileSystem, P], R]) -> Callable[Concatenate[OsFileSystem, P], R]:
    """`method`, whose storage failures go to the file system's `on_failure`."""
    @wraps(method)
    def guarded(fs: OsFileSystem, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(fs, *args, **kwargs)
        except OSError as exc:
            target = args[0] if args else next(iter(kwargs.values()))  # a path, or rename_all's moves
            hand_over(exc, target if isinstance(target, str) else str(target[0][0]), fs.on_failure)  # type: ignore[index]
    return guarded


class OsFileSystem:
    def __init__(self, max_open_files: int = -1, on_failure: Callable[[str, OSError], NoReturn] | None = None) -> None:
        self.on_failure = on_failure
        self._fds: OrderedDict[str, int] = OrderedDict()
        self.max_open_files = default_max_open_files() if max_open_files < 0 else max(1, max_open_files)
        self._lock = threading.RLock()
        self.evictions = 0
        """Handles closed for the bound (cumulative): about the reopens a too low bound costs."""

    def _fd(self, path: str, create: bool = False) -> tuple[int, bool]:
        """The open handle of `path`, most recently used now, and whether this call created
        the file (its directory is then fsynced by the caller, outside the lock: the loop
        never waits on a worker thread's directory fsync). The caller holds the lock."""
        fd = self._fds.get(path)
        if fd is not None:
            self._fds.move_to_end(path)
            return fd, False
        fd, created = self._open(path, create)
        self._fds[path] = fd
        while len(self._fds) > self.max_open_files:
            _, old_fd = self._fds.popitem(last=False)
            self.evictions += 1
            os.close(old_fd)
        return fd, created

    @staticmethod
    def _open(path: str, create: bool) -> tuple[int, bool]:
        try:
            return os.open(path, os.O_RDWR | os.O_APPEND), False
        except FileNotFoundError:
            if not create:
                raise
            return os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644), True

    @_storage_op
    def append(self, path: str, data: Buffer, *, keep_open: bool = True) -> int:
        with self._lock:
            if keep_open or path in self._fds:
                fd, created = self._fd(path, create=True)
                position = _write_all(fd, data)
            else:
                fd, created = self._open(path, create=True)
                try:
                    position = _write_all(fd, data)
                finally:
                    os.close(fd)
        if created:
            self._fsync_dir(os.path.dirname(path) or ".")
        return position

    @_storage_op
    def read(self, path: str, position: int, size: int) -> bytes:
        with self._lock:
            fd, _ = self._fd(path)
            chunks: list[bytes] = []
            while size > 0:
                chunk = os.pread(fd, size, position)
                if not chunk:
                    break
                chunks.append(chunk)
                position += len(chunk)
                size -= len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def read_range(self, path: str, position: int, size: int) -> bytes:
        return self.read(path, position, size)

    @_storage_op
    def write_file(self, path: str, data: Buffer) -> None:
        # Overwritten in place, cut only when the old content was longer (a leader epoch
        # checkpoint grows by one line per epoch): an O_TRUNC open makes ext4 wait for the
        # file's pages under writeback and journal the truncation, 7-17x the cost of the write.
        self.close(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            view = memoryview(data)
            position = 0
            while position < len(view):
                position += os.pwrite(fd, view[position:], position)
            if os.fstat(fd).st_size > position:
                os.ftruncate(fd, position)
        finally:
            os.close(fd)

    @_storage_op
    def truncate(self, path: str, size: int) -> None:
        with self._lock:
            fd, _ = self._fd(path)
            if os.fstat(fd).st_size > size:
                os.ftruncate(fd, size)

    @_storage_op
    def fsync(self, path: str) -> None:
        """Through a duplicate of the handle, outside the lock: the loop never waits on a
        worker thread's fsync, and a handle closed for the bound meanwhile is not the one
        synced (the duplicate keeps the file open until the sync returns)."""
        with self._lock:
            fd = os.dup(self._fd(path)[0])
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    @_storage_op
    def size(self, path: str) -> int:
        with self._lock:
            fd = self._fds.get(path)
            return os.fstat(fd).st_size if fd is not None else os.path.getsize(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    @_storage_op
    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    @_storage_op
    def mkdirs(self, path: str, durable: bool = True) -> None:
        if not os.path.isdir(path):
            os.makedirs(path, exist_ok=True)
            if durable:
                self._fsync_dir(os.path.dirname(path.rstrip("/")) or ".")

    @_storage_op
    def sync_dir(self, path: str) -> None:
        self._fsync_dir(path)

    @_storage_op
    def rename(self, source: str, destination: str) -> None:
        self._close_under(source)
        self.close(destination)
        os.replace(source, destination)
        self._fsync_dir(os.path.dirname(destination) or ".")

    @_storage_op
    def rename_all(self, moves: Sequence[tuple[str, str]]) -> None:
        parents: dict[str, None] = {}
        self._close_under_all([source for source, _ in moves])
        for source, destination in moves:
            self.close(destination)
            os.replace(source, destination)
            parents[os.path.dirname(destination) or "."] = None
        for parent in parents:
            self._fsync_dir(parent)

    @_storage_op
    def delete(self, path: str) -> None:
        self._close_under(path)
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        elif os.path.exists(path):
            os.remove(path)
        else:
            return
        self._fsync_dir(os.path.dirname(path.rstrip("/")) or ".")

    def close(self, path: str) -> None:
        with self._lock:
            fd = self._fds.pop(path, None)
            if fd is not None:
                os.close(fd)

    def close_all(self) -> None:
        with self._lock:
            for path in list(self._fds):
                self.close(path)

    def open_files(self) -> int:
        return len(self._fds)

    def _close_under(self, path: str) -> None:
        """Close the open files at or below `path`. A file closes its own handle only (every
        checkpoint rename lands here: scanning every open handle for each of ten thousand logs
        made a node's shutdown quadratic); a directory, one prefix test per open file rather
        than a walk up each one's directories."""
        root = path.rstrip("/")
        if not os.path.isdir(root):
            self.close(root)
            return
        below = root + "/"
        with self._lock:
            for p in [p for p in self._fds if p == root or p.startswith(below)]:
                self.close(p)

    def _close_under_all(self, paths: Sequence[str]) -> None:
        """Close the open files at or below any of `paths`: one pass over the open files
        (a deletion of ten thousand partitions must not scan them ten thousand times)."""
        roots = {path.rstrip("/") for path in paths}
        with self._lock:
            for p in [p for p in self._fds if _under(p, roots)]:
                self.close(p)

    @staticmethod
    def _fsync_dir(path: str) -> None:
        """A directory gone, or one whose file system does not sync directories, is no error."""
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            if is_storage_failure(exc):
                raise


def _under(path: str, roots: set[str]) -> bool:
    while path and path not in roots:
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent
    return bool(path)


def _write_all(fd: int, data: Buffer) -> int:
    """Append all of `data` through `fd` (O_APPEND); the position it starts at."""
    position = os.fstat(fd).st_size
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
    return position


class OsDiskUsage:
    """The replica manager's DiskUsage port: a log dir's file system's total and free bytes."""

    def usage(self, path: str) -> tuple[int, int]:
        du = shutil.disk_usage(path)
        return du.total, du.free
