"""Kafka's offset index (`<base>.index`): sparse offset -> file position entries.

Entry: relative offset int32 + physical position int32 (8 bytes, big-endian). One entry is
added when more than index.interval.bytes were appended since the previous one.
"""

from __future__ import annotations

import bisect
import struct
from typing import Final

from kmirror.log.index_file import IndexFile

ENTRY: Final = struct.Struct(">ii")


class OffsetIndex(IndexFile):
    ENTRY = ENTRY

    def _encode(self, key: int, value: int) -> bytes:
        return ENTRY.pack(key - self.base_offset, value)

    def _decode(self, raw: tuple[int, ...]) -> tuple[int, int]:
        return self.base_offset + raw[0], raw[1]

    def append(self, offset: int, position: int) -> None:
        self._append(offset, position)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry with offset <= target, else (base, 0)."""
        i = self._floor(target_offset)
        if i < 0:
            return self.base_offset, 0
        return self._keys[i], self._values[i]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= `offset`."""
        self._truncate_entries(bisect.bisect_left(self._keys, offset))

    def truncate_to_position(self, position: int) -> None:
        """Remove every entry pointing at or past `position` (after a torn tail cut)."""
        self._truncate_entries(bisect.bisect_left(self._values, position))

    @property
    def last_offset(self) -> int:
        return self._keys[-1] if self._keys else self.base_offset

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._keys, self._values, strict=True))
