"""Share sessions: opening, incremental epochs, forgetting, the final epoch, ShareAcknowledge's
rules and the cache's bound."""

from __future__ import annotations

from kmirror.protocol.errors import ErrorCode
from kmirror.share.sessions import ShareFetchContext, ShareSessionCache, next_epoch
from kmirror.types import TopicPartition

A, B = TopicPartition("t", 0), TopicPartition("t", 1)
KEY = ("g", "m")


def test_a_session_opens_goes_on_and_ends() -> None:
    cache = ShareSessionCache(10)
    assert cache.fetch_context(KEY, 0, [A], [], False, 0) == ShareFetchContext((A,), full=True)
    assert cache.fetch_context(KEY, 1, [B], [], True, 0) == ShareFetchContext((A, B), full=False)
    assert cache.fetch_context(KEY, 2, [], [A], False, 0) == ShareFetchContext((B,), full=False)
    assert cache.fetch_context(KEY, 2, [], [], False, 0) == ErrorCode.invalid_share_session_epoch
    final = cache.fetch_context(KEY, -1, [], [], True, 0)
    assert final == ShareFetchContext((B,), full=True, final=True)


def test_refusals() -> None:
    cache = ShareSessionCache(10)
    assert cache.fetch_context(KEY, 3, [A], [], False, 0) == ErrorCode.share_session_not_found
    assert cache.fetch_context(KEY, -1, [], [], False, 0) == ErrorCode.share_session_not_found
    assert cache.fetch_context(KEY, 0, [A], [], True, 0) == ErrorCode.invalid_request  # acks without a session
    cache.fetch_context(KEY, 0, [A], [], False, 0)
    assert cache.fetch_context(KEY, -1, [A], [], False, 0) == ErrorCode.invalid_request  # a final fetch fetches nothing


def test_opening_again_replaces_the_session() -> None:
    cache = ShareSessionCache(10)
    cache.fetch_context(KEY, 0, [A], [], False, 0)
    cache.fetch_context(KEY, 1, [B], [], False, 0)
    assert cache.fetch_context(KEY, 0, [B], [], False, 0) == ShareFetchContext((B,), full=True)
    assert len(cache) == 1


def test_share_acknowledge_needs_a_session_and_its_epoch() -> None:
    cache = ShareSessionCache(10)
    assert cache.acknowledge_context(KEY, 1, 0) == ErrorCode.share_session_not_found
    cache.fetch_context(KEY, 0, [A], [], False, 0)
    assert cache.acknowledge_context(KEY, 0, 0) == ErrorCode.invalid_share_session_epoch
    assert cache.acknowledge_context(KEY, 2, 0) == ErrorCode.invalid_share_session_epoch
    assert cache.acknowledge_context(KEY, 1, 0) is False
    assert cache.fetch_context(KEY, 2, [], [], False, 0) == ShareFetchContext((A,), full=False)
    assert cache.acknowledge_context(KEY, -1, 0) is True


def test_the_cache_is_bounded_and_evicts_only_idle_sessions() -> None:
    cache = ShareSessionCache(1, eviction_idle_ms=1000)
    cache.fetch_context(("g", "a"), 0, [A], [], False, 0)
    assert cache.fetch_context(("g", "b"), 0, [A], [], False, 500) == ErrorCode.share_session_limit_reached
    assert cache.fetch_context(("g", "b"), 0, [A], [], False, 1000) == ShareFetchContext((A,), full=True)
    assert cache.get(("g", "a")) is None


def test_epochs_wrap_to_one() -> None:
    assert next_epoch(0) == 1 and next_epoch(2**31 - 1) == 1 and next_epoch(-1) == 0
