"""The leader epoch cache: which epoch started writing at which offset (a value).

Kafka `LeaderEpochFileCache` without its file: `kmirror.log.checkpoint` persists it as
`leader-epoch-checkpoint`. Entries are (epoch, start_offset), both strictly increasing.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True, order=True)
class EpochEntry:
    epoch: int
    start_offset: int


class EpochCache:
    def __init__(self, entries: list[EpochEntry] | None = None) -> None:
        self._entries: list[EpochEntry] = []
        for entry in entries or ():
            self.assign(entry.epoch, entry.start_offset)

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EpochCache) and self._entries == other._entries

    def __repr__(self) -> str:
        return f"EpochCache({self._entries!r})"

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset`; True when the cache changed.

        Kafka's rules: no change if `epoch` is already the latest with a start at or below
        `start_offset`; otherwise entries with an epoch >= `epoch` or a start offset >=
        `start_offset` are removed first, keeping both columns monotonic.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid epoch entry ({epoch}, {start_offset})")
        latest = self.latest_entry
        if latest is not None and epoch == latest.epoch and start_offset >= latest.start_offset:
            return False
        while self._entries and (self._entries[-1].epoch >= epoch
                                 or self._entries[-1].start_offset >= start_offset):
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        return True

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch of the largest entry starting at or before `offset`."""
        i = bisect.bisect_right([e.start_offset for e in self._entries], offset) - 1
        return self._entries[i].epoch if i >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka `LeaderEpochFileCache.endOffsetFor` (OffsetsForLeaderEpoch).

        - requested == UNDEFINED, or above every known epoch -> (-1, -1);
        - requested == latest epoch -> (requested, log_end_offset);
        - below the earliest epoch -> (requested, start offset of the earliest epoch);
        - otherwise (largest epoch <= requested, start offset of the next higher epoch).
        """
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries and self._entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        higher = bisect.bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = higher - 1
        if floor < 0:
            return requested_epoch, self._entries[higher].start_offset
        return self._entries[floor].epoch, self._entries[higher].start_offset

    def truncate_from_end(self, end_offset: int) -> bool:
        """Remove entries starting at or after `end_offset` (log truncated to it)."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return False
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """Log start moved to `start_offset`: drop entries wholly before it and move the
        start of the epoch covering it up to `start_offset` (Kafka keeps that epoch)."""
        if not self._entries or self._entries[0].start_offset >= start_offset:
            return False
        removed: EpochEntry | None = None
        while self._entries and self._entries[0].start_offset <= start_offset:
            removed = self._entries.pop(0)
        assert removed is not None
        self._entries.insert(0, EpochEntry(removed.epoch, start_offset))
        return True

    def clear(self) -> None:
        self._entries.clear()
