"""Transaction state while cleaning (Kafka `CleanedTransactionMetadata`).

Seeded with the aborted transactions (from the transaction index) overlapping the round,
it follows the log batch by batch: data batches of an aborted transaction may be dropped at
once; an ABORT marker is kept (and its aborted transaction re-indexed in the cleaned
segment) while this round still met batches of its transaction; a COMMIT marker, or an
ABORT whose data is gone, belongs to an empty transaction and may go once its delete
horizon has passed (KIP-534 piggy-backs markers on tombstone retention).
"""

from __future__ import annotations

import heapq

from kmirror.log.transaction_index import AbortedTxn
from kmirror.records.batch import BatchHeader
from kmirror.records.control import ControlType


class CleanedTransactionMetadata:
    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._aborted = [(t.first_offset, i, t) for i, t in enumerate(aborted)]
        heapq.heapify(self._aborted)
        self._ongoing_committed: set[int] = set()
        self._ongoing_aborted: dict[int, tuple[AbortedTxn, bool]] = {}  # pid -> (txn, batch seen)
        self.retained_aborted: list[AbortedTxn] = []  # for the cleaned segment's index

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted and self._aborted[0][0] <= offset:
            _, _, txn = heapq.heappop(self._aborted)
            self._ongoing_aborted[txn.producer_id] = (txn, False)

    def on_batch_read(self, header: BatchHeader) -> bool:
        """A data batch: True when it belongs to an aborted transaction (discardable)."""
        self._consume_aborted_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        aborted = self._ongoing_aborted.get(header.producer_id)
        if aborted is not None:
            self._ongoing_aborted[header.producer_id] = (aborted[0], True)
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch_read(self, header: BatchHeader, control_type: ControlType) -> bool:
        """A control batch: True when its transaction has no batch left in this round
        (the marker may then go once past its delete horizon)."""
        self._consume_aborted_up_to(header.last_offset)
        if control_type == ControlType.ABORT:
            aborted = self._ongoing_aborted.pop(header.producer_id, None)
            if aborted is not None and aborted[1]:
                self.retained_aborted.append(aborted[0])
                return False
            return True
        if control_type == ControlType.COMMIT:
            if header.producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(header.producer_id)
                return False
            return True
        return False
