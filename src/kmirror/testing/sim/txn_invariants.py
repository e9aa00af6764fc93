"""What the simulation checks about transactions (`kmirror.testing.sim.transactions`), from
the stored log alone. Each check returns the violations it found as strings.

Two readings of a partition are compared: the markers' (a transaction's records count when
its COMMIT marker below the LSO follows them, an ABORT drops them) and a read_committed
consumer's (records below the LSO minus the aborted transactions the log's `.txnindex`
lists, Kafka's `Fetcher` algorithm). They must agree, and across partitions a transaction
ends one way only: never committed on one partition and aborted on another.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kmirror.records.batch import iter_batches
from kmirror.records.control import ControlType, read_control_type
from kmirror.records.record import decode_records
from kmirror.testing.sim.invariants import StoredBatch
from kmirror.testing.sim.transactions import tag_of

COMMIT, ABORT = "COMMIT", "ABORT"


@dataclass
class PartitionTxns:
    """One partition's transactions as its markers tell them."""

    outcomes: dict[bytes, str] = field(default_factory=dict)  # tag -> COMMIT / ABORT
    open_tags: set[bytes] = field(default_factory=set)  # records without a marker yet
    visible: list[bytes] = field(default_factory=list)  # read_committed values, in offset order


@dataclass(frozen=True, slots=True)
class _Batch:
    producer_id: int
    is_transactional: bool
    is_control: bool
    control: ControlType | None
    records: tuple[tuple[int, bytes], ...]  # (offset, value)


@functools.lru_cache(maxsize=1 << 16)
def _decode(raw: bytes) -> _Batch:
    """A stored batch as these checks read it (cached: every event reads every log again)."""
    [(_, h)] = list(iter_batches(raw))
    control = read_control_type(raw, 0) if h.is_control else None
    records = tuple((r.offset, bytes(r.value or b"")) for r in decode_records(raw, 0))
    return _Batch(h.producer_id, h.is_transactional, h.is_control, control, records)


def _records(b: StoredBatch) -> tuple[tuple[int, bytes], ...]:
    return _decode(b.raw).records


def _values(b: StoredBatch) -> list[bytes]:
    return [v for _, v in _records(b)]


def by_markers(batches: Iterable[StoredBatch], last_stable_offset: int) -> PartitionTxns:
    out = PartitionTxns()
    pending: dict[int, list[tuple[bytes | None, int, bytes]]] = {}
    visible: list[tuple[int, bytes]] = []
    for b in batches:
        h = _decode(b.raw)
        if h.is_control:
            if not h.is_transactional:
                continue
            kind = h.control
            if kind not in (ControlType.COMMIT, ControlType.ABORT):
                continue
            for tag, offset, value in pending.pop(h.producer_id, []):
                if tag is not None:
                    out.outcomes.setdefault(tag, COMMIT if kind is ControlType.COMMIT else ABORT)
                if kind is ControlType.COMMIT and b.base_offset < last_stable_offset:
                    visible.append((offset, value))
        elif h.is_transactional:
            pending.setdefault(h.producer_id, []).extend((tag_of(v), o, v) for o, v in _records(b))
        elif b.last_offset < last_stable_offset:
            visible.extend(_records(b))
    out.open_tags = {tag for held in pending.values() for tag, _, _ in held if tag is not None}
    out.visible = [v for _, v in sorted(visible)]
    return out


def read_committed(log: Any, batches: Iterable[StoredBatch]) -> list[bytes]:
    """What a read_committed consumer gets from the start: below the LSO, minus the
    transactions the log lists as aborted (Kafka `Fetcher`/`CompletedFetch`: a producer's
    records are skipped from an aborted transaction's first offset to its ABORT marker)."""
    lso = log.last_stable_offset
    aborted = sorted(log.collect_aborted_transactions(log.log_start_offset, lso), key=lambda a: a.first_offset)
    aborting: set[int] = set()
    i = 0
    values: list[bytes] = []
    for b in batches:
        if b.last_offset >= lso:
            break
        h = _decode(b.raw)
        while i < len(aborted) and aborted[i].first_offset <= b.last_offset:
            aborting.add(aborted[i].producer_id)
            i += 1
        if h.is_control:
            if h.is_transactional and h.control is ControlType.ABORT:
                aborting.discard(h.producer_id)
            continue
        if h.is_transactional and h.producer_id in aborting:
            continue
        values.extend(_values(b))
    return values


def check_partition(name: str, log: Any, batches: list[StoredBatch]) -> tuple[PartitionTxns, list[str]]:
    view = by_markers(batches, log.last_stable_offset)
    consumer = read_committed(log, batches)
    if consumer != view.visible:
        missing = [v for v in view.visible if v not in consumer][:3]
        extra = [v for v in consumer if v not in view.visible][:3]
        return view, [f"{name}: read_committed (LSO {log.last_stable_offset}, .txnindex) disagrees with the "
                      f"markers: missing {missing}, extra {extra}"]
    return view, []


def whole(cluster: str, views: dict[int, PartitionTxns], acknowledged: dict[bytes, bool]) -> list[str]:
    """A transaction ends one way on every partition, the way EndTxn acknowledged it."""
    out: list[str] = []
    seen: dict[bytes, dict[int, str]] = {}
    for p, view in views.items():
        for tag, outcome in view.outcomes.items():
            seen.setdefault(tag, {})[p] = outcome
    for tag, by_partition in sorted(seen.items()):
        outcomes = set(by_partition.values())
        if len(outcomes) > 1:
            out.append(f"{cluster}: transaction {tag.decode()} half visible: {by_partition}")
        wanted = acknowledged.get(tag)
        if wanted is not None and outcomes != {COMMIT if wanted else ABORT}:
            out.append(f"{cluster}: transaction {tag.decode()} acknowledged as {'commit' if wanted else 'abort'} "
                       f"ended {by_partition}")
    return out
