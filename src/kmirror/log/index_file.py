"""What Kafka's two sparse segment indexes share (`AbstractIndex`).

Storage choice: Kafka preallocates `segment.index.bytes` and memory-maps the file, trimming
it on close. Here an index file is written append-only through the FileSystem port and
mirrored in memory, so it never holds a zero-filled tail and needs no trim; the on-disk
entry format is Kafka's byte for byte. An index is derived data: a file that fails the
sanity check is rebuilt from the segment (Kafka `LogSegment.recover`).

Entries reach the file in groups, as Kafka's mapped pages reach the disk: at a flush (which
moves the log's recovery point, and the loader rebuilds the indexes of every segment past
it), at close, before a rename or truncation of the file, and once `WRITE_BEHIND_BYTES`
are waiting. An index file keeps no open handle (a node of thousands of partitions keeps
its descriptors for the `.log` files), so one write per entry cost an open, a write and a
close for every few batches appended.
"""

from __future__ import annotations

import bisect
import struct

from kmirror.log.fs import FileSystem

WRITE_BEHIND_BYTES = 4096


class IndexFile:
    """Sorted (key, value) entries; `keys` strictly increasing. Subclasses fix the format."""

    ENTRY: struct.Struct

    def __init__(self, fs: FileSystem, path: str, base_offset: int, max_index_size: int) -> None:
        self.fs = fs
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.ENTRY.size)
        self._keys: list[int] = []
        self._values: list[int] = []
        self._unwritten = bytearray()  # the last entries, not in the file yet

    # -- entry encoding (subclasses) --------------------------------------------------------

    def _encode(self, key: int, value: int) -> bytes:
        raise NotImplementedError

    def _decode(self, raw: tuple[int, ...]) -> tuple[int, int]:
        raise NotImplementedError

    # -- lifecycle --------------------------------------------------------------------------

    def load(self) -> bool:
        """Read the file; False (and no entries) when it is missing or fails the sanity check
        (size not a whole number of entries, keys or values not increasing)."""
        self._keys, self._values = [], []
        self._unwritten.clear()
        if not self.fs.exists(self.path):
            self.fs.write_file(self.path, b"")
            return False
        size = self.fs.size(self.path)
        if size % self.ENTRY.size != 0:
            return False
        raw = self.fs.read(self.path, 0, size)
        keys: list[int] = []
        values: list[int] = []
        for entry in self.ENTRY.iter_unpack(raw):
            key, value = self._decode(entry)
            if keys and (key <= keys[-1] or value < values[-1]):
                return False
            keys.append(key)
            values.append(value)
        self._keys, self._values = keys, values
        return True

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._keys, self._values = [], []
        self._unwritten.clear()
        self.fs.write_file(self.path, b"")

    def write_out(self) -> None:
        """Write the entries not in the file yet (before anything reads, moves or syncs it)."""
        if self._unwritten:
            self.fs.append(self.path, bytes(self._unwritten), keep_open=False)
            self._unwritten.clear()

    def discard_unwritten(self) -> None:
        """The file is being deleted: its last entries need not be written."""
        self._unwritten.clear()

    def flush(self) -> None:
        self.write_out()
        if self.fs.exists(self.path):
            self.fs.fsync(self.path)

    def close(self) -> None:
        self.write_out()
        self.fs.close(self.path)

    # -- entries ----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        return len(self._keys) >= self.max_entries

    def _append(self, key: int, value: int) -> None:
        if self._keys and key <= self._keys[-1]:
            raise ValueError(f"index {self.path}: key {key} not above last {self._keys[-1]}")
        if self.is_full:
            raise ValueError(f"index {self.path} is full")
        self._unwritten += self._encode(key, value)
        if len(self._unwritten) >= WRITE_BEHIND_BYTES:
            self.write_out()
        self._keys.append(key)
        self._values.append(value)

    def _floor(self, key: int) -> int:
        """Index of the largest entry whose key is <= `key`, or -1."""
        return bisect.bisect_right(self._keys, key) - 1

    def _truncate_entries(self, count: int) -> None:
        if count < len(self._keys):
            self.write_out()
            del self._keys[count:]
            del self._values[count:]
            self.fs.truncate(self.path, count * self.ENTRY.size)
