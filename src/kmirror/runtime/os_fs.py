"""The real `kmirror.log.fs.FileSystem` on the operating system's files.

One handle per file, opened on first use in read+append mode and kept until `close`, so
segments do not reopen per read. Reads use `os.pread` (no shared seek position). Writes go
to the page cache: a killed process loses nothing written, and `fsync` makes them durable
against a machine crash (Kafka's flush.messages/flush.ms default relies on the same).
Directory-changing operations fsync the parent directory so they survive a crash.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

from kmirror.log.fs import Buffer


class OsFileSystem:
    def __init__(self) -> None:
        self._fds: dict[str, int] = {}

    def _fd(self, path: str, create: bool = False) -> int:
        fd = self._fds.get(path)
        if fd is None:
            flags = os.O_RDWR | os.O_APPEND | (os.O_CREAT if create else 0)
            fd = os.open(path, flags, 0o644)
            self._fds[path] = fd
            if create:
                self._fsync_dir(os.path.dirname(path) or ".")
        return fd

    def append(self, path: str, data: Buffer) -> int:
        fd = self._fd(path, create=True)
        position = os.fstat(fd).st_size
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        return position

    def read(self, path: str, position: int, size: int) -> bytes:
        fd = self._fd(path)
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

    def write_file(self, path: str, data: Buffer) -> None:
        self.close(path)
        with open(path, "wb") as f:
            f.write(data)

    def truncate(self, path: str, size: int) -> None:
        fd = self._fd(path)
        if os.fstat(fd).st_size > size:
            os.ftruncate(fd, size)

    def fsync(self, path: str) -> None:
        os.fsync(self._fd(path))

    def size(self, path: str) -> int:
        fd = self._fds.get(path)
        return os.fstat(fd).st_size if fd is not None else os.path.getsize(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(path))

    def mkdirs(self, path: str) -> None:
        if not os.path.isdir(path):
            os.makedirs(path, exist_ok=True)
            self._fsync_dir(os.path.dirname(path.rstrip("/")) or ".")

    def rename(self, source: str, destination: str) -> None:
        self._close_under(source)
        self.close(destination)
        os.replace(source, destination)
        self._fsync_dir(os.path.dirname(destination) or ".")

    def rename_all(self, moves: Sequence[tuple[str, str]]) -> None:
        parents: dict[str, None] = {}
        for source, destination in moves:
            self._close_under(source)
            self.close(destination)
            os.replace(source, destination)
            parents[os.path.dirname(destination) or "."] = None
        for parent in parents:
            self._fsync_dir(parent)

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
        fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)

    def close_all(self) -> None:
        for path in list(self._fds):
            self.close(path)

    def _close_under(self, path: str) -> None:
        prefix = path.rstrip("/") + "/"
        for p in [p for p in list(self._fds) if p == path or p.startswith(prefix)]:  # list(): atomic copy
            self.close(p)

    @staticmethod
    def _fsync_dir(path: str) -> None:
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)
