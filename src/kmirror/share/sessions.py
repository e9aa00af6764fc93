"""Share sessions (KIP-932): the partitions a share group member fetches from one broker,
kept between its ShareFetch requests (Kafka `ShareSessionCache`, `SharePartitionManager.newContext`).

A session is keyed by (group id, member id). ShareSessionEpoch 0 opens a session (replacing
one the member had) with the request's partitions; a positive epoch must be the session's
next epoch and adds the request's partitions and drops its forgotten ones; -1 (final) ends
the session after its acknowledgements and may fetch nothing. ShareAcknowledge may not open a
session (epoch 0 is INVALID_SHARE_SESSION_EPOCH). Expected outcomes are values: the
`ErrorCode` of a refused request.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from kmirror.protocol.errors import ErrorCode
from kmirror.types import TopicPartition

INITIAL_EPOCH, FINAL_EPOCH = 0, -1
_MAX_EPOCH = 2**31 - 1

SessionKey = tuple[str, str]  # (group id, member id)


def next_epoch(epoch: int) -> int:
    """Kafka `ShareRequestMetadata.nextEpoch`: 1 after the initial epoch, wrapping to 1."""
    return INITIAL_EPOCH if epoch < 0 else 1 if epoch == _MAX_EPOCH else epoch + 1


@dataclass
class ShareSession:
    key: SessionKey
    epoch: int
    partitions: dict[TopicPartition, None] = field(default_factory=dict)  # ordered set
    last_used_ms: int = 0


@dataclass(frozen=True, slots=True)
class ShareFetchContext:
    """What a ShareFetch may do: `partitions` to fetch (empty for a final request), whether
    the answer lists every partition of the session (`full`), and whether the session ends
    after it (`final`)."""

    partitions: tuple[TopicPartition, ...]
    full: bool
    final: bool = False


class ShareSessionCache:
    """At most `max_sessions` sessions (`group.share.max.share.sessions`); when full, the one
    unused longest is evicted for a new one if it was idle at least `eviction_idle_ms`, else
    the new session is refused with SHARE_SESSION_LIMIT_REACHED."""

    def __init__(self, max_sessions: int, eviction_idle_ms: int = 60_000) -> None:
        self.max_sessions = max_sessions
        self.eviction_idle_ms = eviction_idle_ms
        self._sessions: dict[SessionKey, ShareSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, key: SessionKey) -> ShareSession | None:
        return self._sessions.get(key)

    def remove(self, key: SessionKey) -> ShareSession | None:
        return self._sessions.pop(key, None)

    def sessions_of_group(self, group_id: str) -> list[ShareSession]:
        return [s for (g, _m), s in self._sessions.items() if g == group_id]

    def fetch_context(self, key: SessionKey, epoch: int, partitions: Iterable[TopicPartition],
                      forgotten: Iterable[TopicPartition], has_acknowledgements: bool,
                      now_ms: int) -> ShareFetchContext | ErrorCode:
        requested = list(partitions)
        if epoch == FINAL_EPOCH:
            if requested:
                return ErrorCode.invalid_request
            session = self._sessions.get(key)
            if session is None:
                return ErrorCode.share_session_not_found
            return ShareFetchContext(tuple(session.partitions), full=True, final=True)
        if epoch == INITIAL_EPOCH:
            if has_acknowledgements:
                return ErrorCode.invalid_request
            self._sessions.pop(key, None)
            if len(self._sessions) >= self.max_sessions and not self._evict_one(now_ms):
                return ErrorCode.share_session_limit_reached
            session = ShareSession(key, next_epoch(INITIAL_EPOCH), dict.fromkeys(requested), now_ms)
            self._sessions[key] = session
            return ShareFetchContext(tuple(session.partitions), full=True)
        session = self._sessions.get(key)
        if session is None:
            return ErrorCode.share_session_not_found
        if session.epoch != epoch:
            return ErrorCode.invalid_share_session_epoch
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for tp in requested:
            session.partitions.setdefault(tp)
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = now_ms
        return ShareFetchContext(tuple(session.partitions), full=False)

    def acknowledge_context(self, key: SessionKey, epoch: int, now_ms: int) -> bool | ErrorCode:
        """ShareAcknowledge's session check (Kafka `acknowledgeSessionUpdate`): True when the
        session ends after it (final epoch), False when it goes on, or the refusal."""
        if epoch == INITIAL_EPOCH:
            return ErrorCode.invalid_share_session_epoch
        session = self._sessions.get(key)
        if session is None:
            return ErrorCode.share_session_not_found
        if epoch == FINAL_EPOCH:
            return True
        if session.epoch != epoch:
            return ErrorCode.invalid_share_session_epoch
        session.epoch = next_epoch(session.epoch)
        session.last_used_ms = now_ms
        return False

    def _evict_one(self, now_ms: int) -> bool:
        oldest = min(self._sessions.values(), key=lambda s: s.last_used_ms, default=None)
        if oldest is None or now_ms - oldest.last_used_ms < self.eviction_idle_ms:
            return False
        del self._sessions[oldest.key]
        return True
