import itertools

import pytest

from kmirror.protocol.errors import ErrorCode
from kmirror.share.partition import (
    TRANSITIONS,
    AcknowledgeType,
    AcquiredRecords,
    RecordEvent,
    RecordState,
    SharePartition,
    StateBatch,
)

S = RecordState
E = RecordEvent
A = AcknowledgeType
LOCK_MS = 30_000


def acquired(p: SharePartition, member: str, *batches: tuple[int, int], now_ms: int = 0,
             max_records: int = 1000) -> list[AcquiredRecords]:
    return p.acquire(member, list(batches), now_ms, max_records)


def states(p: SharePartition, first: int, last: int) -> list[tuple[RecordState, int]]:
    return [p.state_of(o) for o in range(first, last + 1)]


# -- the transition table -----------------------------------------------------------------------

RELEASES = (E.RELEASE, E.LOCK_TIMEOUT, E.MEMBER_LEFT)
KAFKA_MOVES = {
    (S.AVAILABLE, E.ACQUIRE, False): S.ACQUIRED,
    **{(S.ACQUIRED, E.ACCEPT, x): S.ACKNOWLEDGED for x in (False, True)},
    **{(S.ACQUIRED, e, x): S.ARCHIVED for e in (E.REJECT, E.GAP) for x in (False, True)},
    **{(S.ACQUIRED, e, False): S.AVAILABLE for e in RELEASES},
    **{(S.ACQUIRED, e, True): S.ARCHIVED for e in RELEASES},
}


@pytest.mark.parametrize("key", list(itertools.product(S, E, (False, True))), ids=str)
def test_transition_table_is_kafkas(key):
    assert TRANSITIONS.get(key) == KAFKA_MOVES.get(key)


def test_wire_and_persisted_values():
    assert [(t.name, t.value) for t in A] == [("GAP", 0), ("ACCEPT", 1), ("RELEASE", 2), ("REJECT", 3)]
    assert [(s.name, s.value) for s in S] == [
        ("AVAILABLE", 0), ("ACQUIRED", 1), ("ACKNOWLEDGED", 2), ("ARCHIVED", 4)]


# -- acquisition ----------------------------------------------------------------------------------

def test_new_partition():
    p = SharePartition(10)
    assert (p.start_offset, p.end_offset) == (10, 10)
    assert p.state_of(10) == (S.AVAILABLE, 0)
    assert p.acquirable_from() == 10
    assert p.next_deadline_ms() is None
    assert p.state_batches() == []
    with pytest.raises(ValueError):
        p.state_of(9)


def test_acquire_new_records_locks_them():
    p = SharePartition(10, lock_duration_ms=500)
    assert acquired(p, "m1", (10, 14), now_ms=1000) == [AcquiredRecords(10, 14, 1)]
    assert (p.start_offset, p.end_offset) == (10, 15)
    assert states(p, 10, 14) == [(S.ACQUIRED, 1)] * 5
    assert p.state_of(15) == (S.AVAILABLE, 0)
    assert p.acquired_by(12) == "m1" and p.acquired_count() == 5
    assert p.next_deadline_ms() == 1500
    assert p.acquirable_from() == 15
    assert acquired(p, "m2", (10, 14)) == []  # already ACQUIRED: skipped


def test_acquire_ignores_offsets_below_start_and_skips_unavailable():
    p = SharePartition(0)
    acquired(p, "m1", (0, 5))
    assert p.acknowledge("m1", [(0, 1, (A.ACCEPT,)), (3, 3, (A.RELEASE,)), (5, 5, (A.ACCEPT,))]) is ErrorCode.none
    assert p.start_offset == 2
    # 0-1 below start, 2 and 4 ACQUIRED, 5 ACKNOWLEDGED: only 3 and the new 6-7
    assert acquired(p, "m2", (0, 7)) == [AcquiredRecords(3, 3, 2), AcquiredRecords(6, 7, 1)]


def test_gap_between_batches_is_archived():
    p = SharePartition(0)
    assert acquired(p, "m1", (0, 1), (5, 6)) == [AcquiredRecords(0, 1, 1), AcquiredRecords(5, 6, 1)]
    assert states(p, 2, 4) == [(S.ARCHIVED, 0)] * 3
    assert p.end_offset == 7
    p.acknowledge("m1", [(0, 1, (A.ACCEPT,))])
    assert p.start_offset == 5  # past the archived gap


def test_gap_at_start_moves_start_and_end():
    p = SharePartition(0)
    assert acquired(p, "m1", (5, 6)) == [AcquiredRecords(5, 6, 1)]
    assert (p.start_offset, p.end_offset) == (5, 7)
    assert p.state_batches() == [StateBatch(5, 6, S.ACQUIRED, 1)]


def test_max_records_is_soft_at_batch_granularity():
    def run(max_records):
        return acquired(SharePartition(0), "m1", (0, 2), (3, 5), (6, 8), max_records=max_records)

    assert run(3) == [AcquiredRecords(0, 2, 1)]
    assert run(4) == [AcquiredRecords(0, 5, 1)]  # the limit is reached inside the second batch
    assert run(1) == [AcquiredRecords(0, 2, 1)]


def test_in_flight_bound_stops_before_a_new_batch_beyond_the_window():
    p = SharePartition(0, max_in_flight_records=5)
    assert acquired(p, "m1", (0, 2), (3, 5), (6, 8)) == [AcquiredRecords(0, 5, 1)]
    assert p.end_offset == 6


def test_first_new_batch_allowed_when_the_window_is_empty():
    p = SharePartition(0, max_in_flight_records=2)
    assert acquired(p, "m1", (0, 9)) == [AcquiredRecords(0, 9, 1)]
    assert p.acquirable_from() is None
    p.acknowledge("m1", [(0, 9, (A.ACCEPT,))])
    assert acquired(p, "m1", (20, 21), (22, 23)) == [AcquiredRecords(20, 21, 1)]  # a log gap wider than the window
    assert (p.start_offset, p.end_offset) == (20, 22)


def test_acquirable_from_none_when_window_full_and_nothing_available():
    p = SharePartition(0, max_in_flight_records=5)
    acquired(p, "m1", (0, 4))
    assert p.acquirable_from() is None
    assert acquired(p, "m1", (5, 6)) == []
    assert p.end_offset == 5
    p.acknowledge("m1", [(2, 2, (A.RELEASE,))])
    assert p.acquirable_from() == 2  # available in flight, window still full
    p.acknowledge("m1", [(0, 0, (A.ACCEPT,))])
    assert p.acquirable_from() == 2
    assert acquired(p, "m2", (2, 2), (5, 5)) == [AcquiredRecords(2, 2, 2), AcquiredRecords(5, 5, 1)]
    assert p.acquirable_from() is None


def test_straddling_batch_acquires_its_in_flight_part_when_window_full():
    p = SharePartition(0, max_in_flight_records=3)
    acquired(p, "m1", (0, 2))
    p.acknowledge("m1", [(2, 2, (A.RELEASE,))])
    assert acquired(p, "m2", (2, 4)) == [AcquiredRecords(2, 2, 2)]
    assert p.end_offset == 3


def test_acquired_ranges_split_on_delivery_count():
    p = SharePartition(0)
    acquired(p, "m1", (0, 3))
    p.acknowledge("m1", [(1, 2, (A.RELEASE,))])
    assert acquired(p, "m2", (0, 5)) == [AcquiredRecords(1, 2, 2), AcquiredRecords(4, 5, 1)]


def test_acquire_rejects_unsorted_batches():
    with pytest.raises(ValueError):
        acquired(SharePartition(0), "m1", (3, 4), (0, 1))
    with pytest.raises(ValueError):
        acquired(SharePartition(0), "m1", (3, 2))


# -- acknowledgement ------------------------------------------------------------------------------

def test_accept_advances_start_past_leading_acknowledged_only():
    p = SharePartition(10)
    acquired(p, "m1", (10, 13))
    assert p.acknowledge("m1", [(11, 12, (A.ACCEPT,))]) is ErrorCode.none
    assert p.start_offset == 10
    assert states(p, 11, 12) == [(S.ACKNOWLEDGED, 1)] * 2
    assert p.acknowledge("m1", [(10, 10, (A.ACCEPT,))]) is ErrorCode.none
    assert p.start_offset == 13
    assert p.state_batches() == [StateBatch(13, 13, S.ACQUIRED, 1)]


def test_release_makes_available_again():
    p = SharePartition(0)
    acquired(p, "m1", (0, 2))
    assert p.acknowledge("m1", [(0, 2, (A.RELEASE,))]) is ErrorCode.none
    assert states(p, 0, 2) == [(S.AVAILABLE, 1)] * 3
    assert p.acquired_by(0) is None and p.next_deadline_ms() is None
    assert p.acquirable_from() == 0
    assert acquired(p, "m2", (0, 2)) == [AcquiredRecords(0, 2, 2)]


def test_release_at_delivery_count_limit_archives():
    p = SharePartition(0, delivery_count_limit=2)
    acquired(p, "m1", (0, 1))
    p.acknowledge("m1", [(0, 1, (A.RELEASE,))])
    assert acquired(p, "m1", (0, 1)) == [AcquiredRecords(0, 1, 2)]
    p.acknowledge("m1", [(0, 0, (A.RELEASE,))])
    assert p.start_offset == 1  # 0 archived
    p.acknowledge("m1", [(1, 1, (A.ACCEPT,))])
    assert (p.start_offset, p.end_offset) == (2, 2)


def test_per_offset_types_reject_and_gap_archive():
    p = SharePartition(0)
    acquired(p, "m1", (0, 4))
    types = (A.ACCEPT, A.GAP, A.REJECT, A.RELEASE, A.ACCEPT)
    assert p.acknowledge("m1", [(0, 4, types)]) is ErrorCode.none
    assert p.start_offset == 3
    assert states(p, 3, 4) == [(S.AVAILABLE, 1), (S.ACKNOWLEDGED, 1)]
    q = SharePartition(0)
    acquired(q, "m1", (0, 2))
    q.acknowledge("m1", [(1, 1, (A.GAP,)), (2, 2, (A.REJECT,))])
    assert states(q, 1, 2) == [(S.ARCHIVED, 1)] * 2


def test_acknowledging_another_members_record_is_refused_atomically():
    p = SharePartition(0)
    acquired(p, "m1", (0, 2))
    acquired(p, "m2", (3, 5))
    before = p.state_batches()
    result = p.acknowledge("m1", [(0, 1, (A.ACCEPT,)), (2, 3, (A.ACCEPT,))])
    assert result is ErrorCode.invalid_record_state
    assert p.state_batches() == before and p.start_offset == 0
    assert p.acquired_by(3) == "m2"


@pytest.mark.parametrize("batch", [
    (2, 2, (A.ACCEPT,)),  # AVAILABLE, released
    (3, 3, (A.ACCEPT,)),  # ACKNOWLEDGED
    (4, 5, (A.ACCEPT,)),  # 5 not in flight
    (9, 9, (A.ACCEPT,)),
    (0, 0, (A.ACCEPT,)),  # below start
])
def test_acknowledging_unacquired_records_is_invalid_record_state(batch):
    p = SharePartition(0)
    acquired(p, "m1", (0, 4))
    p.acknowledge("m1", [(0, 0, (A.ACCEPT,)), (2, 2, (A.RELEASE,)), (3, 3, (A.ACCEPT,))])
    before = (p.start_offset, p.state_batches())
    batches = sorted([(1, 1, (A.ACCEPT,)), batch])
    assert p.acknowledge("m1", batches) is ErrorCode.invalid_record_state
    assert (p.start_offset, p.state_batches()) == before


@pytest.mark.parametrize("batches", [
    [(3, 2, (A.ACCEPT,))],
    [(0, 2, ())],
    [(0, 2, (A.ACCEPT, A.ACCEPT))],
    [(0, 1, (A.ACCEPT, A.ACCEPT, A.ACCEPT))],
    [(0, 2, (A.ACCEPT,)), (2, 3, (A.ACCEPT,))],  # overlapping
    [(3, 3, (A.ACCEPT,)), (0, 1, (A.ACCEPT,))],  # unsorted
    [(0, 0, (7,))],  # unknown type
    [(0, 0, (A.ACCEPT,)), (9, 8, (A.ACCEPT,))],  # malformed wins over a valid first batch
    [(-1, 0, (A.ACCEPT,))],
])
def test_malformed_acknowledgements_are_invalid_request(batches):
    p = SharePartition(0)
    acquired(p, "m1", (0, 4))
    assert p.acknowledge("m1", batches) is ErrorCode.invalid_request
    assert p.state_batches() == [StateBatch(0, 4, S.ACQUIRED, 1)]


# -- locks and members ----------------------------------------------------------------------------

def test_lock_expiry_at_deadline():
    p = SharePartition(0, lock_duration_ms=100, delivery_count_limit=2)
    acquired(p, "m1", (0, 1), now_ms=1000)
    acquired(p, "m2", (2, 2), now_ms=1050)
    assert p.next_deadline_ms() == 1100
    assert p.expire_locks(1099) == 0
    assert p.expire_locks(1100) == 2
    assert states(p, 0, 2) == [(S.AVAILABLE, 1), (S.AVAILABLE, 1), (S.ACQUIRED, 1)]
    assert p.next_deadline_ms() == 1150
    acquired(p, "m3", (0, 1), now_ms=2000)
    assert p.expire_locks(2100) == 3
    assert p.start_offset == 2  # 0-1 reached the limit: archived
    assert p.next_deadline_ms() is None


def test_member_left_releases_only_its_records():
    p = SharePartition(0)
    acquired(p, "m1", (0, 1))
    acquired(p, "m2", (2, 3))
    assert p.release_member("m1") == 2
    assert states(p, 0, 3) == [(S.AVAILABLE, 1)] * 2 + [(S.ACQUIRED, 1)] * 2
    assert p.acquired_by(2) == "m2" and p.acquired_count() == 2
    assert p.release_member("m1") == 0


def test_member_left_at_limit_archives():
    p = SharePartition(0, delivery_count_limit=1)
    acquired(p, "m1", (0, 1))
    p.release_member("m1")
    assert (p.start_offset, p.end_offset) == (2, 2)


# -- persistence, log start, reset ----------------------------------------------------------------

def test_state_batches_round_trip_turns_acquired_into_available():
    p = SharePartition(0, delivery_count_limit=3)
    acquired(p, "m1", (0, 7))
    p.acknowledge("m1", [(1, 1, (A.ACCEPT,)), (2, 3, (A.RELEASE,)), (4, 4, (A.REJECT,))])
    acquired(p, "m2", (2, 2))
    batches = p.state_batches()
    assert batches == [
        StateBatch(0, 0, S.ACQUIRED, 1), StateBatch(1, 1, S.ACKNOWLEDGED, 1),
        StateBatch(2, 2, S.ACQUIRED, 2), StateBatch(3, 3, S.AVAILABLE, 1),
        StateBatch(4, 4, S.ARCHIVED, 1), StateBatch(5, 7, S.ACQUIRED, 1)]
    q = SharePartition.from_state(p.start_offset, batches, delivery_count_limit=3)
    assert (q.start_offset, q.end_offset) == (0, 8)
    assert q.state_batches() == [
        StateBatch(0, 0, S.AVAILABLE, 1), StateBatch(1, 1, S.ACKNOWLEDGED, 1),
        StateBatch(2, 2, S.AVAILABLE, 2), StateBatch(3, 3, S.AVAILABLE, 1),
        StateBatch(4, 4, S.ARCHIVED, 1), StateBatch(5, 7, S.AVAILABLE, 1)]
    assert q.acquired_count() == 0 and q.next_deadline_ms() is None
    assert acquired(q, "m3", (0, 8)) == [
        AcquiredRecords(0, 0, 2), AcquiredRecords(2, 2, 3), AcquiredRecords(3, 3, 2),
        AcquiredRecords(5, 7, 2), AcquiredRecords(8, 8, 1)]


def test_from_state_edges():
    q = SharePartition.from_state(10, [
        StateBatch(5, 11, S.ACKNOWLEDGED, 1),  # partly below start
        StateBatch(14, 14, S.ACQUIRED, 2),  # at the limit: archived
        StateBatch(15, 15, S.AVAILABLE, 2),  # idem
        StateBatch(16, 16, S.ACQUIRED, 1),
    ], delivery_count_limit=2)
    assert (q.start_offset, q.end_offset) == (12, 17)
    assert states(q, 12, 16) == [(S.AVAILABLE, 0)] * 2 + [(S.ARCHIVED, 2)] * 2 + [(S.AVAILABLE, 1)]
    assert SharePartition.from_state(7, []).end_offset == 7
    with pytest.raises(ValueError):
        SharePartition.from_state(0, [StateBatch(3, 4, S.ARCHIVED, 1), StateBatch(4, 5, S.ARCHIVED, 1)])


def test_advance_log_start_drops_records_below_it():
    p = SharePartition(0)
    acquired(p, "m1", (0, 5))
    p.advance_log_start(3)
    assert (p.start_offset, p.end_offset) == (3, 6)
    assert p.acquired_count() == 3 and p.acquired_by(2) is None
    assert p.acknowledge("m1", [(2, 2, (A.ACCEPT,))]) is ErrorCode.invalid_record_state
    p.advance_log_start(1)  # never moves back
    assert p.start_offset == 3
    p.acknowledge("m1", [(5, 5, (A.ACCEPT,))])
    p.advance_log_start(5)
    assert (p.start_offset, p.end_offset) == (6, 6)  # 5 was ACKNOWLEDGED: start moves past it
    p.advance_log_start(9)
    assert (p.start_offset, p.end_offset) == (9, 9)
    assert p.state_batches() == []


def test_reset_start_offset():
    p = SharePartition(0)
    acquired(p, "m1", (0, 5))
    assert p.reset_start_offset(2) is ErrorCode.non_empty_group
    assert (p.start_offset, p.end_offset, p.acquired_count()) == (0, 6, 6)
    p.release_member("m1")
    assert p.reset_start_offset(100) is ErrorCode.none
    assert (p.start_offset, p.end_offset, p.state_batches()) == (100, 100, [])
    assert p.reset_start_offset(3) is ErrorCode.none  # AlterShareGroupOffsets may move back
    assert acquired(p, "m1", (0, 4)) == [AcquiredRecords(3, 4, 1)]


def test_undeliverable_batches_at_the_end_offset_are_archived_and_read_past():
    partition = SharePartition(0)
    partition.acquire("m", [(0, 4)], 0, 100)
    partition.archive_undelivered([(5, 5), (6, 7)])  # e.g. a control batch, then aborted records
    assert partition.end_offset == 8
    assert partition.state_of(5) == (RecordState.ARCHIVED, 0)
    assert partition.acquirable_from() == 8
    partition.archive_undelivered([(20, 20)])  # not at the end offset: left for a later read
    assert partition.end_offset == 8
    partition.acknowledge("m", [(0, 4, (AcknowledgeType.ACCEPT,))])
    assert partition.start_offset == partition.end_offset == 8


def test_undeliverable_batches_of_an_empty_window_move_it():
    partition = SharePartition(3)
    partition.archive_undelivered([(3, 3)])
    assert (partition.start_offset, partition.end_offset) == (4, 4)
