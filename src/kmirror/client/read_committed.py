"""Which fetched batches a consumer delivers: Kafka's consumer rules, sans-IO.

Control batches (transaction markers) are never delivered. Under read_committed a
transactional batch of a producer with an aborted transaction is dropped from that
transaction's first offset until the producer's ABORT marker, exactly as Kafka's
`CompletedFetch.nextFetchedBatch` does with the response's aborted-transaction list:
aborted transactions enter the "aborted producers" set once their first offset is at or
below the batch's last offset, and leave it at their ABORT marker.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator

from kmirror.client.raw_fetch import AbortedTransaction
from kmirror.records.batch import BatchHeader, Buffer, iter_batches
from kmirror.records.control import ControlType, read_control_type


def delivered_batches(
    records: Buffer,
    fetch_offset: int,
    *,
    read_committed: bool = False,
    aborted_transactions: Iterable[AbortedTransaction] = (),
) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of the data batches in `records` a consumer delivers, in order.

    Batches ending before `fetch_offset` are skipped (a broker may answer from the start of
    the batch holding the offset); a partial batch at the end is ignored, as consumers do.
    """
    pending = [(a.first_offset, a.producer_id) for a in aborted_transactions] if read_committed else []
    heapq.heapify(pending)
    aborted_producers: set[int] = set()
    for pos, header in iter_batches(records, allow_truncated_tail=True):
        if header.next_offset <= fetch_offset:
            continue
        if read_committed:
            while pending and pending[0][0] <= header.last_offset:
                aborted_producers.add(heapq.heappop(pending)[1])
            if header.is_control:
                if (header.producer_id in aborted_producers
                        and read_control_type(records, pos) is ControlType.ABORT):
                    aborted_producers.discard(header.producer_id)
                continue
            if header.is_transactional and header.producer_id in aborted_producers:
                continue
        elif header.is_control:
            continue
        yield pos, header


def next_fetch_offset(records: Buffer, fetch_offset: int) -> int:
    """The offset after the last whole batch in `records` (control batches included), or
    `fetch_offset` when there is none: where the next Fetch starts."""
    position = fetch_offset
    for _, header in iter_batches(records, allow_truncated_tail=True):
        position = max(position, header.next_offset)
    return position
