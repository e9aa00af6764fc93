"""An in-memory `FileSystem` that can lose unflushed writes: tests and simulation.

Each file keeps its current bytes and the bytes made durable by the last `fsync`.
`crash()` models a machine crash: every file reverts to its durable bytes, optionally
keeping part of the unflushed tail (a torn write). Directory operations (create, rename,
delete) are durable immediately, as `kmirror.log.fs` documents.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kmirror.log.fs import Buffer, dirname


@dataclass
class _File:
    data: bytearray = field(default_factory=bytearray)
    durable: bytes = b""


class MemoryFileSystem:
    def __init__(self) -> None:
        self._files: dict[str, _File] = {}
        self._dirs: set[str] = {"/"}
        self.fsync_count = 0

    # -- FileSystem -------------------------------------------------------------------------

    def append(self, path: str, data: Buffer, *, keep_open: bool = True) -> int:
        f = self._file(path, create=True)
        position = len(f.data)
        f.data += data
        return position

    def read(self, path: str, position: int, size: int) -> bytes:
        f = self._file(path)
        return bytes(f.data[position:position + size])

    def read_range(self, path: str, position: int, size: int) -> bytes:
        return self.read(path, position, size)

    def write_file(self, path: str, data: Buffer) -> None:
        f = self._file(path, create=True)
        f.data = bytearray(data)

    def truncate(self, path: str, size: int) -> None:
        f = self._file(path)
        del f.data[size:]

    def fsync(self, path: str) -> None:
        f = self._file(path)
        f.durable = bytes(f.data)
        self.fsync_count += 1

    def size(self, path: str) -> int:
        return len(self._file(path).data)

    def exists(self, path: str) -> bool:
        path = _norm(path)
        return path in self._files or path in self._dirs

    def is_dir(self, path: str) -> bool:
        return _norm(path) in self._dirs

    def listdir(self, path: str) -> list[str]:
        path = _norm(path)
        if path not in self._dirs:
            raise FileNotFoundError(path)
        prefix = path.rstrip("/") + "/"
        names = {p[len(prefix):].split("/", 1)[0]
                 for p in (*self._files, *self._dirs) if p.startswith(prefix) and p != prefix}
        return sorted(names)

    def mkdirs(self, path: str, durable: bool = True) -> None:
        del durable  # directory operations are durable at once here
        path = _norm(path)
        while path not in self._dirs:
            if path in self._files:
                raise FileExistsError(path)
            self._dirs.add(path)
            path = dirname(path)

    def sync_dir(self, path: str) -> None:
        self.fsync_count += 1

    def rename_all(self, moves: Sequence[tuple[str, str]]) -> None:
        for source, destination in moves:
            self.rename(source, destination)

    def rename(self, source: str, destination: str) -> None:
        source, destination = _norm(source), _norm(destination)
        if dirname(destination) not in self._dirs:
            raise FileNotFoundError(destination)
        if source in self._files:
            self._files[destination] = self._files.pop(source)
            return
        if source not in self._dirs:
            raise FileNotFoundError(source)
        if destination in self._dirs or destination in self._files:
            raise FileExistsError(destination)
        prefix = source + "/"
        self._dirs = {destination + d[len(source):] if d == source or d.startswith(prefix) else d
                      for d in self._dirs}
        self._files = {destination + p[len(source):] if p.startswith(prefix) else p: f
                       for p, f in self._files.items()}

    def delete(self, path: str) -> None:
        path = _norm(path)
        self._files.pop(path, None)
        if path in self._dirs:
            prefix = path + "/"
            self._dirs = {d for d in self._dirs if d != path and not d.startswith(prefix)}
            self._files = {p: f for p, f in self._files.items() if not p.startswith(prefix)}

    def close(self, path: str) -> None:
        return None

    # -- fault injection --------------------------------------------------------------------

    def crash(self, keep_unflushed: Callable[[str, int], int] | None = None) -> None:
        """Lose what was not fsynced. `keep_unflushed(path, n_unflushed_bytes)` may return
        how many bytes of an appended unflushed tail survive (a torn write); default 0."""
        for path, f in self._files.items():
            kept = 0
            current = bytes(f.data)
            if keep_unflushed is not None and current.startswith(f.durable):
                unflushed = len(current) - len(f.durable)
                if unflushed > 0:
                    kept = max(0, min(unflushed, keep_unflushed(path, unflushed)))
            f.data = bytearray(current[:len(f.durable) + kept] if kept else f.durable)

    def unflushed_bytes(self, path: str) -> int:
        f = self._file(path)
        return len(f.data) - len(f.durable) if bytes(f.data).startswith(f.durable) else len(f.data)

    def files(self) -> list[str]:
        return sorted(self._files)

    # -- internals --------------------------------------------------------------------------

    def _file(self, path: str, create: bool = False) -> _File:
        path = _norm(path)
        f = self._files.get(path)
        if f is None:
            if not create:
                raise FileNotFoundError(path)
            if dirname(path) not in self._dirs:
                raise FileNotFoundError(dirname(path))
            if path in self._dirs:
                raise IsADirectoryError(path)
            f = self._files[path] = _File()
        return f


def _norm(path: str) -> str:
    return path.rstrip("/") or "/"
