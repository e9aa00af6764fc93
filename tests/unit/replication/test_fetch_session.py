from kmirror.protocol.errors import ErrorCode
from kmirror.replication.fetch_session import FetchSessionCache, SessionPartition
from kmirror.types import TopicPartition

A = TopicPartition("t", 0)
B = TopicPartition("t", 1)


def part(offset: int) -> SessionPartition:
    return SessionPartition(fetch_offset=offset, partition_max_bytes=100)


def test_sessionless_full_fetch_creates_nothing() -> None:
    cache = FetchSessionCache()
    context = cache.new_context(0, -1, [(A, part(0))], [], now_ms=0)
    assert context.session_id == 0 and not context.incremental and [tp for tp, _ in context.partitions] == [A]
    assert len(cache) == 0


def test_open_then_incremental_updates_offsets_and_forgets() -> None:
    cache = FetchSessionCache()
    opened = cache.new_context(0, 0, [(A, part(0)), (B, part(5))], [], now_ms=0)
    sid = opened.session_id
    assert sid != 0 and not opened.incremental
    context = cache.new_context(sid, 1, [(A, part(3))], [B], now_ms=1)
    assert context.incremental and [(tp, s.fetch_offset) for tp, s in context.partitions] == [(A, 3)]
    assert cache.new_context(sid, 1, [], [], now_ms=2).error == ErrorCode.invalid_fetch_session_epoch
    assert cache.new_context(sid, 2, [], [], now_ms=2).error is None


def test_epoch_zero_with_an_id_replaces_the_session() -> None:
    cache = FetchSessionCache()
    first = cache.new_context(0, 0, [(A, part(0))], [], now_ms=0).session_id
    second = cache.new_context(first, 0, [(B, part(0))], [], now_ms=0).session_id
    assert second != first and len(cache) == 1
    assert cache.new_context(first, 1, [], [], now_ms=0).error == ErrorCode.fetch_session_id_not_found


def test_should_answer_only_changes_in_incremental_contexts() -> None:
    cache = FetchSessionCache()
    sid = cache.new_context(0, 0, [(A, part(0))], [], now_ms=0).session_id
    context = cache.new_context(sid, 1, [], [], now_ms=0)
    (_, state) = context.partitions[0]
    assert context.should_answer(state, False, None, 10, 10, 0)  # first news
    assert not context.should_answer(state, False, None, 10, 10, 0)
    assert context.should_answer(state, True, None, 10, 10, 0)  # records
    assert context.should_answer(state, False, None, 11, 10, 0)  # HW moved
    assert context.should_answer(state, False, ErrorCode.not_leader_or_follower, -1, -1, -1)


def test_full_cache_evicts_only_idle_sessions() -> None:
    cache = FetchSessionCache(max_sessions=1, eviction_ms=1000)
    first = cache.new_context(0, 0, [(A, part(0))], [], now_ms=0).session_id
    refused = cache.new_context(0, 0, [(A, part(0))], [], now_ms=500)
    assert refused.session_id == 0 and refused.error is None  # served sessionless
    replaced = cache.new_context(0, 0, [(A, part(0))], [], now_ms=1000)
    assert replaced.session_id not in (0, first) and len(cache) == 1


def test_partitions_that_returned_records_go_to_the_end_of_the_session() -> None:
    cache = FetchSessionCache()
    C = TopicPartition("t", 2)
    sid = cache.new_context(0, 0, [(A, part(0)), (B, part(0)), (C, part(0))], [], now_ms=0).session_id
    context = cache.new_context(sid, 1, [], [], now_ms=1)
    context.rotate([A])
    assert [tp for tp, _ in cache.new_context(sid, 2, [], [], now_ms=2).partitions] == [B, C, A]
    assert cache.partitions_cached() == 3
