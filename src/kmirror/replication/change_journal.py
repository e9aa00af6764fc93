"""Which hosted partitions' logs changed, in order: what lets a fetch session check only them.

Sans-IO. A consumer's fetch session (KIP-227) answers an incremental request with the
partitions that have something new to say: records, an error, or moved offsets. Finding
them by asking every partition of the session costs a few microseconds each, on every
request and on every re-check of a parked one: tens of milliseconds for a session of ten
thousand partitions (a mirror of a wide topic), most of it for partitions where nothing
happened. Every log reports here when its log end, high watermark or log start moves (an
append, a truncation, retention, DeleteRecords; the last stable offset moves only with one
of those), so a session remembers the journal's position at its last check and asks again
only the partitions recorded since, plus those it could not settle.

The journal keeps at most `limit` entries: past it the older half is dropped, and a session
whose position is older than what is kept (or older than a `reset`) checks every partition,
as before. `reset` is for changes the logs do not see: a new metadata image (leadership,
leader epochs, partitions added or removed).
"""

from __future__ import annotations

from kmirror.types import TopicPartition

DEFAULT_LIMIT = 200_000


class ChangeJournal:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self._limit = max(2, limit)
        self._entries: list[TopicPartition] = []
        self._base = 0  # the position of `_entries[0]`
        self._taken = 0  # entries before the last position a reader took

    def take_position(self) -> int:
        """The position after the last entry, taken by a reader about to check: what is
        recorded from now on is news to it, even a repeat of the last entry."""
        self._taken = len(self._entries)
        return self._base + self._taken

    def record(self, tp: TopicPartition) -> None:
        entries = self._entries
        if len(entries) > self._taken and entries[-1] == tp:
            return  # an append and its high watermark move, recorded once (no reader between)
        entries.append(tp)
        if len(entries) > self._limit:
            dropped = len(entries) // 2
            del entries[:dropped]
            self._base += dropped
            self._taken = max(0, self._taken - dropped)

    def since(self, position: int) -> list[TopicPartition] | None:
        """The partitions recorded at or after `position` (repeats possible); None when that
        is no longer known (dropped, reset, or never checked: a negative position)."""
        if position < self._base:
            return None
        return self._entries[position - self._base:]

    def reset(self) -> None:
        """Every position taken so far becomes unknown: readers check everything once."""
        self._base += len(self._entries) + 1
        self._entries = []
        self._taken = 0
