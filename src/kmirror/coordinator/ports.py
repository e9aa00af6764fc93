"""The coordinator's persistence port: its partitions of `__consumer_offsets`."""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from typing import Protocol


class CoordinatorLog(Protocol):
    def append(self, partition: int, records: list[tuple[bytes, bytes | None]], *, producer_id: int = -1,
               producer_epoch: int = -1) -> Awaitable[int]:
        """Append (key, value) records durably; resolves to the last offset written.
        A None value is a tombstone. Raises if this node cannot append (not leader, disk).
        With a `producer_id` the records are a transactional batch of that producer: they
        count only once its COMMIT marker follows (TxnOffsetCommit)."""
        ...

    def read_all(self, partition: int) -> Iterable[tuple[bytes, bytes | None]]:
        """Every (key, value) record of the partition from its log start, in offset order;
        a committed transaction's records come at its COMMIT marker, an aborted one's never.
        Records of transactions still open at the log end are kept for `open_transactions`."""
        ...

    def open_transactions(self, partition: int) -> dict[int, list[tuple[bytes, bytes | None]]]:
        """After `read_all(partition)`: producer id -> records of its transaction still open."""
        ...
