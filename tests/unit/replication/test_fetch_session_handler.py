"""The fetching side of KIP-227 fetch sessions (Kafka `FetchSessionHandlerTest`'s cases)."""

import uuid
from functools import cache

from kmirror.protocol.errors import ErrorCode
from kmirror.replication.fetcher.engine import FetchPartitionPlan, FetchPlan
from kmirror.replication.fetcher.policy import FetchPolicy
from kmirror.replication.fetcher.session_handler import FINAL_EPOCH, INITIAL_EPOCH, FetchSessionHandler
from kmirror.types import TopicPartition

T_ID = uuid.uuid4()
POLICY = FetchPolicy(replica_id=-1)


def new_part(p: int, offset: int = 0) -> FetchPartitionPlan:
    return FetchPartitionPlan(TopicPartition("t", p), T_ID, offset, -1, -1, 0, 1024)


@cache
def part(p: int, offset: int = 0) -> FetchPartitionPlan:
    """One plan entry per parameters, as the engine keeps an idle partition's entry."""
    return new_part(p, offset)


def plan(*parts: FetchPartitionPlan) -> FetchPlan:
    return FetchPlan(tuple(parts), POLICY)


def opened(handler: FetchSessionHandler, *parts: FetchPartitionPlan, session_id: int = 7) -> None:
    request = handler.build(plan(*parts))
    assert (request.session_id, request.session_epoch) == (0, INITIAL_EPOCH) and request.partitions == parts
    assert handler.handle_response(request, ErrorCode.none, session_id)


def test_a_full_fetch_opens_a_session_and_the_next_lists_only_changed_partitions() -> None:
    handler = FetchSessionHandler()
    opened(handler, part(0), part(1), part(2))
    idle = handler.build(plan(part(0), part(1), part(2)))
    assert (idle.session_id, idle.session_epoch, idle.partitions, idle.forgotten) == (7, 1, (), ())
    assert handler.handle_response(idle, ErrorCode.none, 7)
    moved = handler.build(plan(part(0), part(1, offset=5), part(2), part(3)))
    assert moved.session_epoch == 2
    assert moved.partitions == (part(1, offset=5), part(3)) and moved.forgotten == ()
    assert handler.handle_response(moved, ErrorCode.none, 7)
    shrunk = handler.build(plan(part(1, offset=5), part(3)))
    assert shrunk.session_epoch == 3 and shrunk.partitions == () and shrunk.forgotten == (part(0), part(2))


def test_an_unanswered_incremental_request_changes_nothing_that_was_sent() -> None:
    handler = FetchSessionHandler()
    opened(handler, part(0))
    lost = handler.build(plan(part(0, offset=3)))
    assert lost.partitions == (part(0, offset=3),)
    handler.handle_failure()  # no answer: the leader may have moved the session or not
    again = handler.build(plan(part(0, offset=3)))
    # full, closing session 7 and opening another
    assert (again.session_id, again.session_epoch, again.partitions) == (7, INITIAL_EPOCH, (part(0, offset=3),))


def test_session_id_not_found_starts_a_new_session_with_a_full_fetch() -> None:
    handler = FetchSessionHandler()
    opened(handler, part(0), part(1))
    request = handler.build(plan(part(0), part(1)))
    assert not handler.handle_response(request, ErrorCode.fetch_session_id_not_found, 0)
    full = handler.build(plan(part(0), part(1)))
    assert (full.session_id, full.session_epoch, full.partitions) == (0, INITIAL_EPOCH, (part(0), part(1)))


def test_invalid_epoch_closes_the_session_and_opens_another() -> None:
    handler = FetchSessionHandler()
    opened(handler, part(0))
    request = handler.build(plan(part(0)))
    assert not handler.handle_response(request, ErrorCode.invalid_fetch_session_epoch, 0)
    full = handler.build(plan(part(0)))
    assert (full.session_id, full.session_epoch) == (7, INITIAL_EPOCH)
    assert handler.handle_response(full, ErrorCode.none, 8)
    assert (handler.session_id, handler.next_epoch) == (8, 1)


def test_a_leader_that_keeps_no_session_gets_full_requests() -> None:
    handler = FetchSessionHandler()
    for _ in range(3):
        request = handler.build(plan(part(0), part(1)))
        assert (request.session_id, request.session_epoch, len(request.partitions)) == (0, INITIAL_EPOCH, 2)
        assert handler.handle_response(request, ErrorCode.none, 0)


def test_an_incremental_answer_from_another_session_starts_over() -> None:
    handler = FetchSessionHandler()
    opened(handler, part(0))
    request = handler.build(plan(part(0)))
    assert handler.handle_response(request, ErrorCode.none, 0)  # the leader closed the session
    assert handler.build(plan(part(0))).session_epoch == INITIAL_EPOCH


def test_without_session_support_every_request_is_sessionless() -> None:
    handler = FetchSessionHandler()
    request = handler.build(plan(part(0)), sessions=False)
    assert (request.session_id, request.session_epoch, request.partitions) == (0, FINAL_EPOCH, (part(0),))
    assert handler.handle_response(request, ErrorCode.none, 0)
    assert handler.build(plan(part(0)), sessions=False).session_epoch == FINAL_EPOCH


def test_a_restarted_partition_leaves_the_session_and_comes_back_as_new() -> None:
    """The same parameters in a new plan entry: the engine restarted the partition and may have
    dropped an answer (its high watermark) that the leader will not repeat while nothing
    changes. It is forgotten, then added back, and a leader answers a new partition in full."""
    handler = FetchSessionHandler()
    first = part(0)
    opened(handler, first, part(1))
    same = handler.build(plan(first, part(1)))
    assert handler.handle_response(same, ErrorCode.none, 7) and same.partitions == ()
    restarted = new_part(0)  # equal to `first`, another object
    out = handler.build(plan(restarted, part(1)))
    assert out.partitions == () and out.forgotten == (first,)
    assert handler.handle_response(out, ErrorCode.none, 7)
    back = handler.build(plan(restarted, part(1)))
    assert back.partitions == (restarted,) and back.forgotten == ()
