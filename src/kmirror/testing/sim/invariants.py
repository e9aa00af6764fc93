"""What the mirror simulation checks after every event (docs/design/mirroring.md
"Simulation"). Each check returns the violations it found as strings; none is expected."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kmirror.kip1279.state import MirrorPartitionState, is_valid_transition
from kmirror.records.batch import iter_batches
from kmirror.records.control import ControlType, read_control_type
from kmirror.records.record import decode_records
from kmirror.testing.sim.state_store import PersistedChange
from kmirror.types import TopicPartition

S = MirrorPartitionState


@dataclass(frozen=True, slots=True)
class StoredBatch:
    base_offset: int
    last_offset: int
    leader_epoch: int
    raw: bytes

    @property
    def is_mirror_pid_reset(self) -> bool:
        try:
            return read_control_type(self.raw, 0) is ControlType.MIRROR_PID_RESET
        except Exception:
            return False


def stored_batches(rm: Any, tp: TopicPartition) -> list[StoredBatch]:
    """Every batch of the partition's log, in offset order (one segment per read)."""
    p = rm.get_partition(tp)
    if p is None:
        return []
    log = p.log
    out: list[StoredBatch] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        buf = bytes(getattr(log.read(offset, 1 << 30, log.log_end_offset, True), "records", b""))
        if not buf:
            break
        for pos, h in iter_batches(buf):
            out.append(StoredBatch(h.base_offset, h.last_offset, h.partition_leader_epoch, buf[pos:pos + h.size]))
            offset = h.next_offset
    return out


def record_values(batches: Iterable[StoredBatch]) -> dict[int, bytes]:
    out: dict[int, bytes] = {}
    for b in batches:
        for record in decode_records(b.raw, 0):
            out[record.offset] = bytes(record.value or b"")
    return out


def epochs_monotone(name: str, p: Any, batches: list[StoredBatch]) -> list[str]:
    """Batch leader epochs never decrease along the log; the epoch cache's epochs strictly
    increase with non-decreasing start offsets and agree with the batches (a leader may add
    an entry for its epoch at its log end before appending in it)."""
    out: list[str] = []
    for before, after in zip(batches, batches[1:], strict=False):
        if after.leader_epoch < before.leader_epoch:
            out.append(f"{name}: batch epoch goes back {before.leader_epoch}@{before.base_offset} -> "
                       f"{after.leader_epoch}@{after.base_offset}")
    entries = list(p.log.epoch_cache.entries)
    for before, after in zip(entries, entries[1:], strict=False):
        if after.epoch <= before.epoch or after.start_offset < before.start_offset:
            out.append(f"{name}: epoch cache not monotone {before} -> {after}")
    i = -1
    for b in batches:  # the entry covering a batch's base offset carries the batch's epoch
        while i + 1 < len(entries) and entries[i + 1].start_offset <= b.base_offset:
            i += 1
        if i < 0 or entries[i].epoch != b.leader_epoch:
            out.append(f"{name}: batch at {b.base_offset} has epoch {b.leader_epoch}, the epoch cache says "
                       f"{entries[i] if i >= 0 else 'nothing'}")
            break
    return out


def mirrored_prefix(name: str, dst: list[StoredBatch], src: list[StoredBatch], src_high_watermark: int,
                    preexisting: set[tuple[int, bytes]]) -> list[str]:
    """While mirroring, the destination is the source's committed prefix, byte for byte,
    possibly followed by batches it held before the mirror started that the truncation has
    not cut yet (a failback's divergent tail); nothing the mirror wrote follows them."""
    by_offset = {b.base_offset: b.raw for b in src}
    out: list[str] = []
    diverged_at: int | None = None
    for b in dst:
        matches = by_offset.get(b.base_offset) == b.raw and b.last_offset < src_high_watermark
        if matches and diverged_at is None:
            continue
        if (b.base_offset, b.raw) in preexisting:
            diverged_at = b.base_offset if diverged_at is None else diverged_at
            continue
        out.append(f"{name}: batch at {b.base_offset} (epoch {b.leader_epoch}) is not the source's committed "
                   f"batch" + ("" if diverged_at is None else f" and follows the stale tail from {diverged_at}"))
        break
    return out


def legal_changes(name: str, changes: Iterable[PersistedChange], refused: Iterable[str]) -> list[str]:
    """Every persisted state change is a pair of the transition table; a tombstone only
    clears a FAILED partition; the coordinator never had to refuse a write."""
    out = [f"{name}: the manager asked for an illegal transition: {m}" for m in refused]
    for c in changes:
        if c.new is S.UNKNOWN:
            ok = c.old is S.FAILED
        else:
            ok = is_valid_transition(c.old, c.new)
        if not ok:
            out.append(f"{name}: illegal persisted change {c.old.name} -> {c.new.name} of {c.key}")
    return out
