"""Incremental fetch sessions (KIP-227; Kafka `FetchSession`, `FetchSessionCache`, `FetchManager`).

Sans-IO. A fetch request names a session id and epoch:

| session_id | epoch | meaning                                                       |
|------------|-------|---------------------------------------------------------------|
| 0          | -1    | sessionless full fetch (librdkafka, aiokafka)                 |
| 0          | 0     | full fetch opening a session (answered with its new id)       |
| id         | -1    | close session `id`; this request is a sessionless full fetch  |
| id         | 0     | close session `id` and open a new one with this full fetch    |
| id         | n > 0 | incremental fetch: the request lists only changed partitions  |

An incremental request updates the session's partitions (added or changed fetch offsets),
removes the forgotten ones, and is answered only with partitions that have something to
say: records, an error, or a changed high watermark / LSO / log start offset. The expected
epoch starts at 1 and moves by one per successful incremental fetch; a wrong epoch is
INVALID_FETCH_SESSION_EPOCH, an unknown id FETCH_SESSION_ID_NOT_FOUND. When the cache is
full and no session is idle past `eviction_ms`, a full fetch gets no session (id 0) and
the client keeps sending full requests, as with a Kafka broker whose cache is full.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from uuid import UUID

from kmirror.protocol.errors import ErrorCode
from kmirror.replication.change_journal import ChangeJournal
from kmirror.types import TopicPartition

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
# Kafka's `max.incremental.fetch.session.cache.slots` default and minimum eviction age.
DEFAULT_MAX_SESSIONS = 1000
DEFAULT_EVICTION_MS = 120_000

ZERO_UUID = UUID(int=0)


@dataclass(slots=True)
class SessionPartition:
    """What the client asked for a partition, and what it was last told about it."""

    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    topic_id: UUID = ZERO_UUID
    high_watermark: int | None = None
    last_stable_offset: int | None = None
    log_start_offset: int | None = None
    order: int = 0
    """The partition's place in its session's order (`FetchContext.rotate` moves it last)."""

    def take_request(self, other: SessionPartition) -> None:
        self.fetch_offset = other.fetch_offset
        self.partition_max_bytes = other.partition_max_bytes
        self.current_leader_epoch = other.current_leader_epoch
        self.topic_id = other.topic_id


@dataclass(slots=True)
class FetchSession:
    session_id: int
    next_epoch: int
    # In the session's order (a dict keeps insertion order; `rotate` re-inserts). Not an
    # OrderedDict: iterating one looks every key up again, a hash of each of thousands of
    # partitions per request.
    partitions: dict[TopicPartition, SessionPartition]
    last_used_ms: int
    next_order: int = 0
    changes_seen: int = -1
    """The change journal's position at the last check of the partitions (-1: none yet)."""
    unsettled: set[TopicPartition] = field(default_factory=set)
    """Partitions to check at the next read whatever the journal says: new or changed by the
    client, or last found with something to say (records, an error, offsets not yet told)."""

    def place_last(self, state: SessionPartition) -> None:
        state.order = self.next_order
        self.next_order += 1


@dataclass(slots=True)
class FetchContext:
    """How to answer one request: which partitions to read and whether to answer all of them.

    `session_id` is what the response carries (0 for sessionless answers). On error nothing
    is read and the response carries only `error`."""

    session_id: int = INVALID_SESSION_ID
    incremental: bool = False
    partitions: list[tuple[TopicPartition, SessionPartition]] = field(default_factory=list)
    error: ErrorCode | None = None
    session: FetchSession | None = None

    def should_answer(
        self,
        state: SessionPartition,
        has_records: bool,
        error: ErrorCode | None,
        high_watermark: int,
        last_stable_offset: int,
        log_start_offset: int,
    ) -> bool:
        """Kafka `CachedPartition.maybeUpdateResponseData`: full contexts answer every
        partition; incremental ones only those with records, an error or changed offsets.
        The session remembers what it last told the client."""
        changed = (
            state.high_watermark != high_watermark
            or state.last_stable_offset != last_stable_offset
            or state.log_start_offset != log_start_offset
        )
        if error is None:
            state.high_watermark = high_watermark
            state.last_stable_offset = last_stable_offset
            state.log_start_offset = log_start_offset
        if not self.incremental:
            return True
        return has_records or error is not None or changed

    def partitions_to_check(self, journal: ChangeJournal) -> list[tuple[TopicPartition, SessionPartition]]:
        """The partitions a consumer's read must look at, in the session's order: for an
        incremental request of a session, those whose logs moved since its last check (the
        replica manager's change journal) and its unsettled ones; otherwise all. A partition
        left out has nothing new to say: its log did not move, and it was found idle with
        its offsets told since its last request. Report each check with `settle`."""
        session = self.session
        if session is None:
            return self.partitions
        position = journal.take_position()
        changed = journal.since(session.changes_seen)
        session.changes_seen = position
        if not self.incremental or changed is None:
            return self.partitions
        partitions = session.partitions
        candidates = set(session.unsettled)
        candidates.update(tp for tp in changed if tp in partitions)
        return sorted(((tp, partitions[tp]) for tp in candidates), key=_by_order)

    def settle(self, tp: TopicPartition, settled: bool) -> None:
        """A checked partition is settled when it is idle with the offsets the client was
        last told; otherwise (records, an error, offsets to tell) the next read checks it again."""
        if self.session is None:
            return
        if settled:
            self.session.unsettled.discard(tp)
        else:
            self.session.unsettled.add(tp)


    def rotate(self, answered_with_records: Iterable[TopicPartition]) -> None:
        """Kafka's fairness rule for sessions: partitions that returned records go to the end
        of the session's order, so when an answer fills `max_bytes` the partitions that got
        nothing come first next time."""
        if self.session is None:
            return
        partitions = self.session.partitions
        for tp in answered_with_records:
            state = partitions.pop(tp, None)
            if state is not None:
                partitions[tp] = state
                self.session.place_last(state)


class FetchSessionCache:
    def __init__(self, max_sessions: int = DEFAULT_MAX_SESSIONS, eviction_ms: int = DEFAULT_EVICTION_MS) -> None:
        self.max_sessions = max_sessions
        self.eviction_ms = eviction_ms
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first
        self._last_id = 0

    def __len__(self) -> int:
        return len(self._sessions)

    def partitions_cached(self) -> int:
        """Partitions held by all sessions (Kafka `NumIncrementalFetchPartitionsCached`)."""
        return sum(len(s.partitions) for s in self._sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def new_context(
        self,
        session_id: int,
        epoch: int,
        requested: Iterable[tuple[TopicPartition, SessionPartition]],
        forgotten: Iterable[TopicPartition],
        now_ms: int,
    ) -> FetchContext:
        requested = list(requested)
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self._sessions.pop(session_id, None)
            if epoch == FINAL_EPOCH:
                return FetchContext(partitions=requested)
            session = self._create(requested, now_ms)
            if session is None:
                return FetchContext(partitions=requested)
            return FetchContext(session.session_id, False, list(session.partitions.items()), session=session)

        if session_id == INVALID_SESSION_ID:
            return FetchContext(error=ErrorCode.invalid_fetch_session_epoch)
        found = self._sessions.get(session_id)
        if found is None:
            return FetchContext(error=ErrorCode.fetch_session_id_not_found)
        if epoch != found.next_epoch:
            return FetchContext(error=ErrorCode.invalid_fetch_session_epoch)
        for tp, wanted in requested:
            current = found.partitions.get(tp)
            if current is None:
                found.partitions[tp] = wanted
                found.place_last(wanted)
            else:
                current.take_request(wanted)
            found.unsettled.add(tp)
        for tp in forgotten:
            found.partitions.pop(tp, None)
            found.unsettled.discard(tp)
        found.next_epoch = _next_epoch(found.next_epoch)
        found.last_used_ms = now_ms
        self._sessions.move_to_end(session_id)
        return FetchContext(found.session_id, True, list(found.partitions.items()), session=found)

    def _create(self, requested: list[tuple[TopicPartition, SessionPartition]], now_ms: int) -> FetchSession | None:
        if len(self._sessions) >= self.max_sessions and not self._evict_one(now_ms):
            return None
        self._last_id = self._last_id + 1 if self._last_id < 2**31 - 1 else 1
        while self._last_id in self._sessions:
            self._last_id += 1
        session = FetchSession(self._last_id, 1, dict(requested), now_ms)
        for _, state in requested:
            session.place_last(state)
        self._sessions[session.session_id] = session
        return session

    def _evict_one(self, now_ms: int) -> bool:
        for session_id, session in self._sessions.items():
            if now_ms - session.last_used_ms >= self.eviction_ms:
                del self._sessions[session_id]
                return True
            break  # least recently used first: if it is not idle enough, none is
        return False


def _by_order(entry: tuple[TopicPartition, SessionPartition]) -> int:
    return entry[1].order


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= 2**31 - 1 else epoch + 1
