"""Kafka's time index (`<base>.timeindex`): sparse max-timestamp -> offset entries.

Entry: timestamp int64 + relative offset int32 (12 bytes, big-endian). An entry is added
only when the timestamp is above the last one, so timestamps and offsets both increase;
a lookup finds the offset from which to scan for the first record at or after a time.
"""

from __future__ import annotations

import bisect
import struct
from typing import Final

from kmirror.log.index_file import IndexFile

ENTRY: Final = struct.Struct(">qi")
NO_TIMESTAMP: Final = -1


class TimeIndex(IndexFile):
    ENTRY = ENTRY

    def _encode(self, key: int, value: int) -> bytes:
        return ENTRY.pack(key, value - self.base_offset)

    def _decode(self, raw: tuple[int, ...]) -> tuple[int, int]:
        return raw[0], self.base_offset + raw[1]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Kafka `TimeIndex.maybeAppend`: only a timestamp above the last entry's is added."""
        if self._keys and timestamp <= self._keys[-1]:
            return
        if self._values and offset < self._values[-1]:
            raise ValueError(f"time index {self.path}: offset {offset} below {self._values[-1]}")
        if not self.is_full:
            self._append(timestamp, offset)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= target, else (-1, base)."""
        i = self._floor(target_timestamp)
        if i < 0:
            return NO_TIMESTAMP, self.base_offset
        return self._keys[i], self._values[i]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= `offset`."""
        self._truncate_entries(bisect.bisect_left(self._values, offset))

    @property
    def last_entry(self) -> tuple[int, int]:
        if not self._keys:
            return NO_TIMESTAMP, self.base_offset
        return self._keys[-1], self._values[-1]

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._keys, self._values, strict=True))
