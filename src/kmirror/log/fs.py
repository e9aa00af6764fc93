"""The file system port the log layer uses: every side effect goes through a port.

Paths are plain `/`-separated strings. A file is addressed by path; implementations keep
open handles per file so a segment does not reopen per read (`close` releases one).

Durability contract (what `kmirror.testing.memory_fs.MemoryFileSystem.crash` models):
- bytes written by `append`/`write_file` survive a process kill (page cache) but may be
  lost on a crash of the machine until `fsync(path)` returns;
- `rename`, `delete`, `mkdirs` and file creation are durable once they return (a real
  implementation fsyncs the parent directory), except `mkdirs(path, durable=False)`: a new
  partition directory is durable once `sync_dir` of its parent returns, as Kafka's log
  directories become durable at their first flush.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

Buffer = bytes | bytearray | memoryview


class KafkaStorageError(Exception):
    """A log directory failed (Kafka's `KafkaStorageException`): an operation on it, or on a
    log that was in it, cannot be done. The partitions there are offline on this node
    (KAFKA_STORAGE_ERROR to clients) until it restarts with the directory back."""

    def __init__(self, log_dir: str, detail: str = "") -> None:
        super().__init__(f"log directory {log_dir} is offline" + (f": {detail}" if detail else ""))
        self.log_dir = log_dir


class FileSystem(Protocol):
    def append(self, path: str, data: Buffer, *, keep_open: bool = True) -> int:
        """Append `data` at the end of `path` (created if missing); returns the position it starts at.
        `keep_open` False: a file written now and then (an index), whose handle is not kept."""
        ...

    def read(self, path: str, position: int, size: int) -> bytes:
        """Up to `size` bytes from `position`; fewer at end of file."""
        ...

    def read_range(self, path: str, position: int, size: int) -> bytes:
        """Serve a file range to a fetch. Same contract as `read`; the seam where a
        zero-copy transfer (sendfile) can be introduced later."""
        ...

    def write_file(self, path: str, data: Buffer) -> None:
        """Create or replace `path` with `data` (not atomic; see `rename`)."""
        ...

    def truncate(self, path: str, size: int) -> None:
        """Cut `path` to `size` bytes (a no-op if it is not longer)."""
        ...

    def fsync(self, path: str) -> None:
        """Make every byte written to `path` so far durable."""
        ...

    def size(self, path: str) -> int:
        ...

    def exists(self, path: str) -> bool:
        ...

    def is_dir(self, path: str) -> bool:
        ...

    def listdir(self, path: str) -> list[str]:
        """Names (not paths) of the entries of a directory, sorted."""
        ...

    def mkdirs(self, path: str, durable: bool = True) -> None:
        """Create a directory and its parents; no error if it exists. With `durable=False`
        the parent directory is not synced (see `sync_dir`)."""
        ...

    def sync_dir(self, path: str) -> None:
        """Make the entries of directory `path` durable (no error if it is gone)."""
        ...

    def rename(self, source: str, destination: str) -> None:
        """Atomically move a file or directory, replacing a destination file."""
        ...

    def rename_all(self, moves: Sequence[tuple[str, str]]) -> None:
        """`rename` each (source, destination) in order, durable once it returns: a real
        implementation fsyncs each parent directory once, not once per rename (deleting a
        topic of thousands of partitions renames thousands of directories)."""
        ...

    def delete(self, path: str) -> None:
        """Delete a file, or a directory with everything in it; no error if missing."""
        ...

    def close(self, path: str) -> None:
        """Release any handle held for `path` (it stays on disk)."""
        ...


def join(*parts: str) -> str:
    """Join path components with `/` (the port's path syntax on every implementation)."""
    return "/".join(p.rstrip("/") if i == 0 else p.strip("/") for i, p in enumerate(parts) if p != "")


def basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def dirname(path: str) -> str:
    head, _, _ = path.rstrip("/").rpartition("/")
    return head or "/"
