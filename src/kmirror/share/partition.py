"""The share partition (KIP-932; Kafka's `SharePartition`): per-record delivery state of one
topic-partition for one share group. Sans-IO: time comes in as `now_ms`, nothing is persisted here.

Contract:
- Records in [start_offset, end_offset) (SPSO, SPEO) are in flight: each has a `RecordState` and a
  delivery count, and every offset of the window has an entry. Records at or above end_offset are
  AVAILABLE with delivery count 0.
- Every state change of an in-flight record goes through `TRANSITIONS`; an illegal one raises
  `IllegalRecordStateTransition` (a broken invariant). Records enter the window either through
  ACQUIRE or, for offsets of the log that hold no record, directly as ARCHIVED.
- After every change start_offset has moved past every leading ACKNOWLEDGED / ARCHIVED record, so
  the first in-flight record, if any, is AVAILABLE or ACQUIRED.
- An AVAILABLE record always has delivery count < delivery_count_limit: a release at the limit
  archives it instead.
- Refusals a client can cause are `ErrorCode` values; exceptions mean the caller broke a contract.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, IntEnum
from types import MappingProxyType
from typing import NamedTuple

from kmirror.protocol.errors import ErrorCode


class RecordState(IntEnum):
    """Kafka's RecordState, numbered as persisted in `__share_group_state`."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(IntEnum):
    """ShareFetch / ShareAcknowledge `AcknowledgeTypes` wire values."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


class RecordEvent(Enum):
    ACQUIRE = "acquire"
    ACCEPT = "accept"
    RELEASE = "release"
    REJECT = "reject"
    GAP = "gap"
    LOCK_TIMEOUT = "lock timeout"
    MEMBER_LEFT = "member left"


S = RecordState
E = RecordEvent

# (state, event, delivery count has reached delivery_count_limit) -> new state: the only legal moves.
# No entry acquires an exhausted record: it was archived when released.
TRANSITIONS: Mapping[tuple[RecordState, RecordEvent, bool], RecordState] = MappingProxyType({
    (S.AVAILABLE, E.ACQUIRE, False): S.ACQUIRED,
    (S.ACQUIRED, E.ACCEPT, False): S.ACKNOWLEDGED,
    (S.ACQUIRED, E.ACCEPT, True): S.ACKNOWLEDGED,
    (S.ACQUIRED, E.REJECT, False): S.ARCHIVED,
    (S.ACQUIRED, E.REJECT, True): S.ARCHIVED,
    (S.ACQUIRED, E.GAP, False): S.ARCHIVED,
    (S.ACQUIRED, E.GAP, True): S.ARCHIVED,
    (S.ACQUIRED, E.RELEASE, False): S.AVAILABLE,
    (S.ACQUIRED, E.RELEASE, True): S.ARCHIVED,
    (S.ACQUIRED, E.LOCK_TIMEOUT, False): S.AVAILABLE,
    (S.ACQUIRED, E.LOCK_TIMEOUT, True): S.ARCHIVED,
    (S.ACQUIRED, E.MEMBER_LEFT, False): S.AVAILABLE,
    (S.ACQUIRED, E.MEMBER_LEFT, True): S.ARCHIVED,
})

ACKNOWLEDGE_EVENTS: Mapping[AcknowledgeType, RecordEvent] = MappingProxyType({
    AcknowledgeType.GAP: E.GAP,
    AcknowledgeType.ACCEPT: E.ACCEPT,
    AcknowledgeType.RELEASE: E.RELEASE,
    AcknowledgeType.REJECT: E.REJECT,
})

TERMINAL_STATES: frozenset[RecordState] = frozenset({S.ACKNOWLEDGED, S.ARCHIVED})


class IllegalRecordStateTransition(Exception):
    def __init__(self, state: RecordState, event: RecordEvent, exhausted: bool) -> None:
        limit = " at the delivery count limit" if exhausted else ""
        super().__init__(f"illegal share record transition: {event.value} from {state.name}{limit}")
        self.state = state
        self.event = event
        self.exhausted = exhausted


class AcquiredRecords(NamedTuple):
    """ShareFetchResponse `AcquiredRecords`: a run of offsets acquired with one delivery count."""

    first_offset: int
    last_offset: int
    delivery_count: int


class StateBatch(NamedTuple):
    """`__share_group_state`'s PersisterStateBatch: a run of offsets with one state and count."""

    first_offset: int
    last_offset: int
    state: RecordState
    delivery_count: int


# (first_offset, last_offset, types): one type for the whole range, or one per offset.
AcknowledgementBatch = tuple[int, int, tuple[AcknowledgeType, ...]]


@dataclass(slots=True)
class _InFlightRecord:
    state: RecordState
    delivery_count: int
    member_id: str | None = None  # the acquisition lock's holder, only while ACQUIRED
    lock_deadline_ms: int | None = None  # the lock expires when now_ms >= this


class SharePartition:
    def __init__(
        self,
        start_offset: int,
        *,
        max_in_flight_records: int = 2000,
        delivery_count_limit: int = 5,
        lock_duration_ms: int = 30000,
    ) -> None:
        if start_offset < 0 or max_in_flight_records < 1 or delivery_count_limit < 1 or lock_duration_ms < 0:
            raise ValueError("share partition settings out of range")
        self.max_in_flight_records = max_in_flight_records  # group.share.partition.max.record.locks
        self.delivery_count_limit = delivery_count_limit  # group.share.delivery.count.limit
        self.lock_duration_ms = lock_duration_ms  # group.share.record.lock.duration.ms
        self._start = start_offset
        self._end = start_offset
        self._records: dict[int, _InFlightRecord] = {}
        # no lock expires before this (a lower bound: every acquisition lowers it, a scan resets it)
        self._expiry_floor_ms: int | None = None

    @classmethod
    def from_state(
        cls,
        start_offset: int,
        state_batches: Iterable[StateBatch],
        *,
        max_in_flight_records: int = 2000,
        delivery_count_limit: int = 5,
        lock_duration_ms: int = 30000,
    ) -> SharePartition:
        """Rebuild from persisted state. Locks do not survive: an ACQUIRED record comes back
        AVAILABLE (ARCHIVED if its delivery count reached the limit). Offsets of [start_offset,
        last batch] that no batch covers were never delivered: AVAILABLE, count 0. Batches must be
        sorted and disjoint (ValueError otherwise); parts below start_offset are dropped."""
        partition = cls(start_offset, max_in_flight_records=max_in_flight_records,
                        delivery_count_limit=delivery_count_limit, lock_duration_ms=lock_duration_ms)
        records = partition._records
        previous_last = -1
        for first, last, persisted, count in state_batches:
            if first > last or first <= previous_last or count < 0:
                raise ValueError(f"malformed or unsorted state batch {first}..{last}")
            previous_last = last
            state = RecordState(persisted)
            if state in (S.AVAILABLE, S.ACQUIRED):
                state = S.ARCHIVED if count >= delivery_count_limit else S.AVAILABLE
            for offset in range(partition._end, first):
                records[offset] = _InFlightRecord(S.AVAILABLE, 0)
            for offset in range(max(first, start_offset), last + 1):
                records[offset] = _InFlightRecord(state, count)
            partition._end = max(partition._end, last + 1)
        partition._advance_start()
        return partition

    # -- read-only views ------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._end

    def state_of(self, offset: int) -> tuple[RecordState, int]:
        """(state, delivery count); ValueError below start_offset, where no state is kept."""
        if offset < self._start:
            raise ValueError(f"offset {offset} is below the share-partition start offset {self._start}")
        record = self._records.get(offset)
        return (S.AVAILABLE, 0) if record is None else (record.state, record.delivery_count)

    def acquired_by(self, offset: int) -> str | None:
        """The member holding the acquisition lock on `offset`, if it is ACQUIRED."""
        record = self._records.get(offset)
        return None if record is None else record.member_id

    def acquired_count(self) -> int:
        return sum(1 for record in self._records.values() if record.state is S.ACQUIRED)

    def next_deadline_ms(self) -> int | None:
        """The earliest acquisition lock deadline: when `expire_locks` next has work."""
        deadlines = [r.lock_deadline_ms for r in self._records.values() if r.lock_deadline_ms is not None]
        return min(deadlines, default=None)

    def state_batches(self) -> list[StateBatch]:
        """The in-flight records as maximal runs of equal (state, delivery count)."""
        batches: list[StateBatch] = []
        for offset in range(self._start, self._end):
            record = self._records[offset]
            last = batches[-1] if batches else None
            if last is not None and (last.state, last.delivery_count) == (record.state, record.delivery_count):
                batches[-1] = last._replace(last_offset=offset)
            else:
                batches.append(StateBatch(offset, offset, record.state, record.delivery_count))
        return batches

    def acquirable_from(self) -> int | None:
        """Where a share fetch should read the log from: the lowest AVAILABLE in-flight offset,
        else end_offset; None when nothing is AVAILABLE and the in-flight window is full."""
        for offset in range(self._start, self._end):
            if self._records[offset].state is S.AVAILABLE:
                return offset
        if self._end - self._start >= self.max_in_flight_records:
            return None
        return self._end

    # -- changes --------------------------------------------------------------------------------

    def acquire(
        self, member_id: str, batches: Sequence[tuple[int, int]], now_ms: int, max_records: int
    ) -> list[AcquiredRecords]:
        """Acquire, in offset order, the AVAILABLE records of `batches` (base_offset, last_offset:
        the record batches just read from the log, sorted and disjoint, else ValueError).

        Whole batches only: stops before the next batch once `max_records` were acquired, and
        before a batch's new records (at or above end_offset) when they would start at or beyond
        start_offset + max_in_flight_records, unless the window is empty. Log offsets between
        end_offset and a batch hold no record and are archived."""
        acquired: list[AcquiredRecords] = []
        taken = 0
        deadline_ms = now_ms + self.lock_duration_ms
        if self._expiry_floor_ms is None or deadline_ms < self._expiry_floor_ms:
            self._expiry_floor_ms = deadline_ms
        previous_last = -1
        for base, last in batches:
            if base > last or base <= previous_last:
                raise ValueError(f"record batches must be sorted and disjoint, got {base}..{last}")
            previous_last = last
            if taken >= max_records:
                break
            for offset in range(max(base, self._start), min(last + 1, self._end)):
                record = self._records[offset]
                if record.state is S.AVAILABLE:
                    self._transition(record, E.ACQUIRE, member_id, deadline_ms)
                    taken += 1
                    _append(acquired, offset, record.delivery_count)
            if last < self._end:
                continue
            first_new = max(base, self._end)
            if self._end > self._start and first_new - self._start >= self.max_in_flight_records:
                break
            if self._end == self._start:
                self._start = self._end = first_new
            for offset in range(self._end, first_new):
                self._records[offset] = _InFlightRecord(S.ARCHIVED, 0)
            # never delivered: the table's first acquisition, written for the whole batch at once
            state = TRANSITIONS[(S.AVAILABLE, E.ACQUIRE, False)]
            for offset in range(first_new, last + 1):
                self._records[offset] = _InFlightRecord(state, 1, member_id, deadline_ms)
            taken += last + 1 - first_new
            _append(acquired, first_new, 1, last)
            self._end = last + 1
        return acquired

    def acknowledge(self, member_id: str, batches: Sequence[AcknowledgementBatch]) -> ErrorCode:
        """Apply ShareFetch / ShareAcknowledge acknowledgements, all or nothing.

        INVALID_REQUEST: a batch with last < first, no types, a type count that is neither 1 nor
        the range's length, an unknown type, or batches unsorted / overlapping.
        INVALID_RECORD_STATE: an offset that is not in flight and ACQUIRED by `member_id`."""
        previous_last = -1
        for first, last, types in batches:
            if first > last or first <= previous_last or len(types) not in (1, last - first + 1):
                return ErrorCode.invalid_request
            if any(t not in ACKNOWLEDGE_EVENTS for t in types):
                return ErrorCode.invalid_request
            previous_last = last
        for first, last, _ in batches:
            if first < self._start or last >= self._end:
                return ErrorCode.invalid_record_state
            for offset in range(first, last + 1):
                record = self._records[offset]
                if record.state is not S.ACQUIRED or record.member_id != member_id:
                    return ErrorCode.invalid_record_state
        for first, last, types in batches:
            for index, offset in enumerate(range(first, last + 1)):
                ack_type = types[0] if len(types) == 1 else types[index]
                self._transition(self._records[offset], ACKNOWLEDGE_EVENTS[ack_type])
        self._advance_start()
        return ErrorCode.none

    def expire_locks(self, now_ms: int) -> int:
        """Release every record whose lock deadline is <= now_ms; the number released."""
        if self._expiry_floor_ms is None or now_ms < self._expiry_floor_ms:
            return 0
        released = self._release_where(
            lambda r: r.lock_deadline_ms is not None and r.lock_deadline_ms <= now_ms, E.LOCK_TIMEOUT)
        self._expiry_floor_ms = self.next_deadline_ms()
        return released

    def release_member(self, member_id: str) -> int:
        """Release every record `member_id` holds (it left the group or closed its share session)."""
        return self._release_where(lambda r: r.member_id == member_id, E.MEMBER_LEFT)

    def archive_undelivered(self, batches: Sequence[tuple[int, int]]) -> None:
        """Batches the log holds at end_offset that no member can be given (control batches,
        aborted transactional records) go in flight ARCHIVED, so the next fetch reads past
        them; `batches` (base_offset, last_offset, sorted) are taken while they continue
        end_offset."""
        for base, last in batches:
            if last < self._end:
                continue
            if base > self._end:
                break
            if self._end == self._start:
                self._start = self._end = last + 1
                continue
            for offset in range(self._end, last + 1):
                self._records[offset] = _InFlightRecord(S.ARCHIVED, 0)
            self._end = last + 1
        self._advance_start()

    def reset_start_offset(self, offset: int) -> ErrorCode:
        """AlterShareGroupOffsets: forget all in-flight state and restart at `offset`.
        NON_EMPTY_GROUP (and no change) while any record is ACQUIRED."""
        if offset < 0:
            raise ValueError(f"negative share-partition start offset {offset}")
        if self.acquired_count():
            return ErrorCode.non_empty_group
        self._records.clear()
        self._start = self._end = offset
        return ErrorCode.none

    def advance_log_start(self, log_start_offset: int) -> None:
        """The log start moved up (retention, DeleteRecords): records below it no longer exist,
        whatever their state, and leave the window."""
        if log_start_offset <= self._start:
            return
        for offset in range(self._start, min(log_start_offset, self._end)):
            del self._records[offset]
        self._start = log_start_offset
        self._end = max(self._end, log_start_offset)
        self._advance_start()

    # -- internals ------------------------------------------------------------------------------

    def _transition(self, record: _InFlightRecord, event: RecordEvent, member_id: str | None = None,
                    lock_deadline_ms: int | None = None) -> None:
        exhausted = record.delivery_count >= self.delivery_count_limit
        target = TRANSITIONS.get((record.state, event, exhausted))
        if target is None:
            raise IllegalRecordStateTransition(record.state, event, exhausted)
        if event is E.ACQUIRE:
            record.delivery_count += 1
        record.state = target
        record.member_id = member_id  # given with ACQUIRE only: a lock lives while ACQUIRED
        record.lock_deadline_ms = lock_deadline_ms

    def _release_where(self, holds: Callable[[_InFlightRecord], bool], event: RecordEvent) -> int:
        released = [r for r in self._records.values() if r.state is S.ACQUIRED and holds(r)]
        for record in released:
            self._transition(record, event)
        self._advance_start()
        return len(released)

    def _advance_start(self) -> None:
        while self._start < self._end and self._records[self._start].state in TERMINAL_STATES:
            del self._records[self._start]
            self._start += 1


def _append(acquired: list[AcquiredRecords], offset: int, delivery_count: int, last_offset: int | None = None) -> None:
    """Add offsets `offset`..`last_offset` (default: `offset` alone), merged into the last range
    when they continue it with the same delivery count."""
    last_offset = offset if last_offset is None else last_offset
    previous = acquired[-1] if acquired else None
    if previous is not None and previous.last_offset == offset - 1 and previous.delivery_count == delivery_count:
        acquired[-1] = AcquiredRecords(previous.first_offset, last_offset, delivery_count)
    else:
        acquired.append(AcquiredRecords(offset, last_offset, delivery_count))
