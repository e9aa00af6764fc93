"""The coordinator's persistence port: its partitions of `__consumer_offsets`."""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from typing import Protocol


class CoordinatorLog(Protocol):
    def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> Awaitable[int]:
        """Append (key, value) records durably; resolves to the last offset written.
        A None value is a tombstone. Raises if this node cannot append (not leader, disk)."""
        ...

    def read_all(self, partition: int) -> Iterable[tuple[bytes, bytes | None]]:
        """Every (key, value) record of the partition from its log start, in offset order."""
        ...
