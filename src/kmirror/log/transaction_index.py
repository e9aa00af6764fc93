"""Kafka's transaction index (`<base>.txnindex`): the aborted transactions whose ABORT marker
is in the segment (Kafka `TransactionIndex`, `AbortedTxn`).

Entry (34 bytes, big-endian, Kafka's format byte for byte): version int16 (0), producerId
int64, firstOffset int64 (the transaction's first offset, possibly in an earlier segment),
lastOffset int64 (the ABORT marker's offset), lastStableOffset int64 (the LSO right after
the marker was appended: every transaction starting below it had completed).

Contract: entries are appended in marker order (lastOffset never decreases); an entry
whose lastStableOffset is >= a fetch's upper bound ends the search (no later entry, in this
segment or a later one, can overlap the fetched range). The file is derived data: it is
written append-only through the FileSystem port, created only when the first entry is
appended (Kafka creates it lazily too; a missing file means no aborted transaction) and
rebuilt from the segment's batches when the segment is recovered.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from kmirror.log.fs import FileSystem

ENTRY: Final = struct.Struct(">hqqqq")
CURRENT_VERSION: Final = 0


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction ended by a COMMIT or ABORT marker at `last_offset` (Kafka `CompletedTxn`)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    aborted_transactions: list[AbortedTxn]
    is_complete: bool


class TransactionIndex:
    def __init__(self, fs: FileSystem, path: str, base_offset: int) -> None:
        self.fs = fs
        self.path = path
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] = []

    # -- lifecycle --------------------------------------------------------------------------

    def load(self) -> bool:
        """Read the file (a missing one is empty); False when it fails Kafka's sanity check
        (not whole entries, an unknown version, a marker below the segment base offset, or
        markers out of order): the segment must then be recovered."""
        self._entries = []
        if not self.fs.exists(self.path):
            return True
        size = self.fs.size(self.path)
        if size % ENTRY.size != 0:
            return False
        entries: list[AbortedTxn] = []
        for version, producer_id, first, last, lso in ENTRY.iter_unpack(self.fs.read(self.path, 0, size)):
            if (version != CURRENT_VERSION or last < self.base_offset
                    or (entries and last < entries[-1].last_offset)):
                return False
            entries.append(AbortedTxn(producer_id, first, last, lso))
        self._entries = entries
        return True

    def reset(self) -> None:
        """Drop every entry (before a rebuild); the file goes until the next append."""
        self._entries = []
        self.fs.close(self.path)
        self.fs.delete(self.path)

    def flush(self) -> None:
        if self.fs.exists(self.path):
            self.fs.fsync(self.path)

    def close(self) -> None:
        self.fs.close(self.path)

    def delete(self) -> None:
        self.fs.close(self.path)
        self.fs.delete(self.path)

    # -- entries ----------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    def entries(self) -> list[AbortedTxn]:
        return list(self._entries)

    def append(self, txn: AbortedTxn) -> None:
        if self._entries and txn.last_offset < self._entries[-1].last_offset:
            raise ValueError(f"{self.path}: the last offset of appended transactions must increase "
                             f"sequentially, but {txn.last_offset} is below {self._entries[-1].last_offset}")
        self.fs.append(self.path, ENTRY.pack(CURRENT_VERSION, txn.producer_id, txn.first_offset,
                                             txn.last_offset, txn.last_stable_offset))
        self._entries.append(txn)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose marker is at or after `offset`."""
        keep = 0
        while keep < len(self._entries) and self._entries[keep].last_offset < offset:
            keep += 1
        if keep < len(self._entries):
            del self._entries[keep:]
            self.fs.truncate(self.path, keep * ENTRY.size)

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset) (Kafka
        `TransactionIndex.collectAbortedTxns`); complete once an entry's LSO reaches the bound."""
        found: list[AbortedTxn] = []
        for txn in self._entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)
