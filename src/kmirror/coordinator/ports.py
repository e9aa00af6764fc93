"""The coordinator's persistence port: its partitions of its internal topic (Kafka
`PartitionWriter`, on the node's replica manager)."""

from __future__ import annotations

from collections.abc import Awaitable, Iterable
from typing import Protocol

from kmirror.log.producer_state import VerificationGuard
from kmirror.protocol.errors import ErrorCode


class CoordinatorLog(Protocol):
    def append(self, partition: int, records: list[tuple[bytes, bytes | None]], *, producer_id: int = -1,
               producer_epoch: int = -1, verification_guard: VerificationGuard | None = None) -> Awaitable[int]:
        """Append (key, value) records durably; resolves to the last offset written.
        A None value is a tombstone. Raises if this node cannot append (not leader, disk).
        With a `producer_id` the records are a transactional batch of that producer: they
        count only once its COMMIT marker follows (TxnOffsetCommit). A `verification_guard`
        (from `maybe_start_transaction_verification`) makes the partition refuse the batch
        with INVALID_TXN_STATE if it would open a transaction the guard no longer verifies;
        None: not checked."""
        ...

    def append_end_transaction_marker(self, partition: int, *, producer_id: int, producer_epoch: int,
                                      coordinator_epoch: int, committed: bool) -> Awaitable[int]:
        """Append the COMMIT (`committed`) or ABORT marker of `producer_id`'s transaction
        durably (Kafka `PartitionWriter.append` of `MemoryRecords.withEndTransactionMarker`,
        WriteTxnMarkers for a coordinator's partition); resolves to its offset. Raises if this
        node cannot append it (not leader, below `min.insync.replicas`, a fenced epoch...)."""
        ...

    def maybe_start_transaction_verification(self, partition: int, *, transactional_id: str, producer_id: int,
                                             producer_epoch: int) -> Awaitable[VerificationGuard | ErrorCode | None]:
        """KIP-890 part 1, before a transactional batch of the producer is appended to
        `partition` (Kafka `CoordinatorPartitionWriter.maybeStartTransactionVerification`):
        the guard the append carries once the transaction coordinator confirmed the partition
        is in the producer's ongoing transaction (`SENTINEL` when that transaction is open on
        the partition already); the error (Kafka's, unmapped) when it is not or cannot be
        told; None when this log verifies nothing (no transaction coordinator)."""
        ...

    def read_all(self, partition: int) -> Iterable[tuple[bytes, bytes | None]]:
        """Every (key, value) record of the partition from its log start, in offset order;
        a committed transaction's records come at its COMMIT marker, an aborted one's never.
        Records of transactions still open at the log end are kept for `open_transactions`."""
        ...

    def open_transactions(self, partition: int) -> dict[int, list[tuple[bytes, bytes | None]]]:
        """After `read_all(partition)`: producer id -> records of its transaction still open."""
        ...
