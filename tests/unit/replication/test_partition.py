from uuid import uuid4

import pytest

from kmirror.log.outcomes import AppendError
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.outcomes import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    AppendOutcome,
    EpochEndOffset,
    PartitionError,
    ReadOutcome,
    TimestampOffset,
)
from kmirror.replication.partition import Partition, PartitionState
from kmirror.testing.replication import FakeLog
from kmirror.types import TopicPartition

TP = TopicPartition("t", 0)
NODE = 1


def leader_state(epoch: int = 5, isr: tuple[int, ...] = (NODE,), leader: int = NODE) -> PartitionState:
    return PartitionState(leader=leader, leader_epoch=epoch, partition_epoch=0, replicas=(NODE,), isr=isr)


def make(state: PartitionState | None = None, min_isr: int = 1) -> tuple[Partition, FakeLog]:
    log = FakeLog(TP)
    return Partition(TP, uuid4(), log, NODE, state or leader_state(), min_isr), log


def test_append_moves_high_watermark_to_log_end_offset_on_single_replica() -> None:
    partition, log = make()
    result = partition.append_records_to_leader(b"a", required_acks=1, now_ms=0)
    assert result == AppendOutcome(base_offset=0, last_offset=0, log_append_time_ms=-1, log_start_offset=0)
    log.next_count = 3
    result = partition.append_records_to_leader(b"bcd", required_acks=-1, now_ms=0)
    assert isinstance(result, AppendOutcome) and result.base_offset == 1 and result.last_offset == 3
    assert partition.high_watermark == 4 == log.log_end_offset
    assert log.batches[-1].leader_epoch == 5


def test_append_on_non_leader_is_not_leader_or_follower() -> None:
    partition, log = make(leader_state(leader=2))
    assert partition.append_records_to_leader(b"a", 1, 0) == PartitionError(ErrorCode.not_leader_or_follower)
    assert log.batches == []


def test_acks_all_below_min_isr_is_not_enough_replicas_but_acks_one_appends() -> None:
    partition, log = make(min_isr=2)
    result = partition.append_records_to_leader(b"a", -1, 0)
    assert isinstance(result, PartitionError) and result.code == ErrorCode.not_enough_replicas
    assert log.batches == []
    assert isinstance(partition.append_records_to_leader(b"a", 1, 0), AppendOutcome)


def test_log_append_failure_is_passed_through_as_value_and_hw_does_not_move() -> None:
    partition, log = make()
    log.fail_with = AppendError(ErrorCode.corrupt_message, "bad crc")
    result = partition.append_records_to_leader(b"a", 1, 0)
    assert result == PartitionError(ErrorCode.corrupt_message, "bad crc")
    assert partition.high_watermark == 0


def test_high_watermark_is_min_over_isr_and_never_moves_back() -> None:
    state = PartitionState(leader=NODE, leader_epoch=1, partition_epoch=0, replicas=(NODE, 2), isr=(NODE, 2))
    partition, log = make(state)
    log.next_count = 10
    partition.append_records_to_leader(b"x", 1, 0)
    assert partition.high_watermark == 0  # follower 2 has fetched nothing yet
    assert isinstance(partition.fetch_for_follower(2, 4, -1, -1, 1000, True, now_ms=0), ReadOutcome)
    assert partition.high_watermark == 4
    # a follower fetch offset going back (after its truncation) never moves the HW back
    assert isinstance(partition.fetch_for_follower(2, 2, -1, -1, 1000, True, now_ms=0), ReadOutcome)
    assert not partition.maybe_increment_high_watermark()
    assert partition.high_watermark == 4


def test_a_follower_removed_from_the_isr_never_holds_the_high_watermark() -> None:
    # seed 004 / Kafka `maybeIncrementLeaderHW`: the HW is the minimum over the maximal ISR only.
    # A follower the controller just removed (fenced after a kill -9) was caught up a moment
    # ago; it must not hold the HW, or acks=all stalls until some later event.
    both = PartitionState(leader=NODE, leader_epoch=1, partition_epoch=0, replicas=(NODE, 2), isr=(NODE, 2))
    partition, log = make(both)
    partition.update_state(both, now_ms=0)
    log.next_count = 10
    partition.append_records_to_leader(b"x", -1, 0)
    assert isinstance(partition.fetch_for_follower(2, 10, -1, -1, 1000, True, now_ms=0), ReadOutcome)
    assert partition.high_watermark == 10
    shrunk = PartitionState(leader=NODE, leader_epoch=1, partition_epoch=1, replicas=(NODE, 2), isr=(NODE,))
    partition.update_state(shrunk, now_ms=1)
    log.next_count = 5
    partition.append_records_to_leader(b"y", -1, 2)
    assert partition.high_watermark == 15
    assert partition.check_enough_replicas_reach_offset(15) == (True, ErrorCode.none)


@pytest.mark.parametrize(
    ("requested", "expected"),
    [(-1, None), (5, None), (4, ErrorCode.fenced_leader_epoch), (6, ErrorCode.unknown_leader_epoch)],
)
def test_leader_epoch_fencing(requested: int, expected: ErrorCode | None) -> None:
    partition, _ = make(leader_state(epoch=5))
    error = partition.check_leader_epoch(requested)
    assert (error.code if error else None) == expected
    read = partition.read(0, 100, READ_UNCOMMITTED, requested, True)
    assert (read.code if isinstance(read, PartitionError) else None) == expected


def test_read_stops_at_high_watermark_and_answers_stored_bytes() -> None:
    state = PartitionState(leader=NODE, leader_epoch=1, partition_epoch=0, replicas=(NODE, 2), isr=(NODE, 2))
    partition, log = make(state)
    partition.append_records_to_leader(b"first", 1, 0)
    partition.append_records_to_leader(b"second", 1, 0)
    partition.fetch_for_follower(2, 1, -1, -1, 1000, True, now_ms=0)
    read = partition.read(0, 1000, READ_UNCOMMITTED, -1, True)
    assert isinstance(read, ReadOutcome)
    assert bytes(read.records) == b"first"
    assert (read.high_watermark, read.log_end_offset, read.log_start_offset) == (1, 2, 0)
    # Between HW and LEO: empty, not out of range.
    empty = partition.read(1, 1000, READ_UNCOMMITTED, -1, True)
    assert isinstance(empty, ReadOutcome) and empty.size == 0


def test_read_committed_stops_at_last_stable_offset() -> None:
    partition, log = make()
    partition.append_records_to_leader(b"a", 1, 0)
    partition.append_records_to_leader(b"b", 1, 0)
    log.last_stable_offset = 1  # an open transaction at offset 1
    committed = partition.read(0, 1000, READ_COMMITTED, -1, True)
    uncommitted = partition.read(0, 1000, READ_UNCOMMITTED, -1, True)
    assert isinstance(committed, ReadOutcome) and bytes(committed.records) == b"a"
    assert isinstance(uncommitted, ReadOutcome) and bytes(uncommitted.records) == b"ab"


@pytest.mark.parametrize("offset", [-1, 3])
def test_read_outside_log_is_offset_out_of_range(offset: int) -> None:
    partition, _ = make()
    partition.append_records_to_leader(b"a", 1, 0)
    partition.append_records_to_leader(b"b", 1, 0)
    read = partition.read(offset, 1000, READ_UNCOMMITTED, -1, True)
    assert isinstance(read, PartitionError) and read.code == ErrorCode.offset_out_of_range


def test_read_at_log_end_offset_is_empty() -> None:
    partition, _ = make()
    partition.append_records_to_leader(b"a", 1, 0)
    read = partition.read(1, 1000, READ_UNCOMMITTED, -1, True)
    assert isinstance(read, ReadOutcome) and read.size == 0


def test_list_offsets_special_timestamps() -> None:
    partition, log = make(leader_state(epoch=3))
    log.next_timestamp = 100
    partition.append_records_to_leader(b"a", 1, 0)
    log.next_timestamp = 300
    partition.append_records_to_leader(b"b", 1, 0)
    log.next_timestamp = 200
    partition.append_records_to_leader(b"c", 1, 0)
    assert partition.fetch_offset_for_timestamp(-1, READ_UNCOMMITTED, -1) == TimestampOffset(-1, 3, 3)
    assert partition.fetch_offset_for_timestamp(-2, READ_UNCOMMITTED, -1) == TimestampOffset(-1, 0, 3)
    assert partition.fetch_offset_for_timestamp(-4, READ_UNCOMMITTED, -1) == TimestampOffset(-1, 0, 3)
    assert partition.fetch_offset_for_timestamp(-3, READ_UNCOMMITTED, -1) == TimestampOffset(300, 1, 3)
    assert partition.fetch_offset_for_timestamp(150, READ_UNCOMMITTED, -1) == TimestampOffset(300, 1, 3)
    assert partition.fetch_offset_for_timestamp(1000, READ_UNCOMMITTED, -1) is None
    log.last_stable_offset = 1
    assert partition.fetch_offset_for_timestamp(-1, READ_COMMITTED, -1) == TimestampOffset(-1, 1, 3)
    assert partition.fetch_offset_for_timestamp(150, READ_COMMITTED, -1) is None


def test_last_offset_for_leader_epoch() -> None:
    partition, log = make(leader_state(epoch=2))
    partition.append_records_to_leader(b"a", 1, 0)
    partition.update_state(leader_state(epoch=4))
    partition.append_records_to_leader(b"b", 1, 0)
    assert partition.last_offset_for_leader_epoch(-1, 2) == EpochEndOffset(2, 1)
    assert partition.last_offset_for_leader_epoch(-1, 3) == EpochEndOffset(2, 1)
    assert partition.last_offset_for_leader_epoch(4, 4) == EpochEndOffset(4, 2)
    assert partition.last_offset_for_leader_epoch(-1, 1) == EpochEndOffset(-1, -1)
    fenced = partition.last_offset_for_leader_epoch(3, 4)
    assert isinstance(fenced, PartitionError) and fenced.code == ErrorCode.fenced_leader_epoch


def test_older_registration_is_ignored() -> None:
    partition, _ = make(leader_state(epoch=4))
    partition.update_state(leader_state(epoch=3, leader=2))
    assert partition.leader_epoch == 4 and partition.is_leader


def test_delete_records_up_to_high_watermark() -> None:
    partition, log = make()
    log.next_count = 5
    partition.append_records_to_leader(b"a", 1, 0)
    assert partition.delete_records_on_leader(2) == 2
    assert log.log_start_offset == 2
    assert partition.delete_records_on_leader(-1) == 5
    beyond = partition.delete_records_on_leader(6)
    assert isinstance(beyond, PartitionError) and beyond.code == ErrorCode.offset_out_of_range


def test_max_timestamp_never_exposes_a_record_above_the_high_watermark() -> None:
    # Kafka `Partition.fetchOffsetForTimestamp`: every lookup but LATEST/EARLIEST is bounded by
    # the last fetchable offset, MAX_TIMESTAMP (-3) included.
    state = PartitionState(leader=NODE, leader_epoch=1, partition_epoch=0, replicas=(NODE, 2), isr=(NODE, 2))
    partition, log = make(state)
    log.next_timestamp = 100
    partition.append_records_to_leader(b"a", 1, 0)
    assert isinstance(partition.fetch_for_follower(2, 1, -1, -1, 1000, True, now_ms=0), ReadOutcome)
    assert partition.high_watermark == 1
    log.next_timestamp = 500
    partition.append_records_to_leader(b"b", 1, 0)  # not replicated: above the HW
    assert partition.fetch_offset_for_timestamp(-3, READ_UNCOMMITTED, -1) is None
    assert partition.fetch_offset_for_timestamp(-3, READ_UNCOMMITTED, -1, from_replica=True) == TimestampOffset(500, 1, 1)
    assert isinstance(partition.fetch_for_follower(2, 2, -1, -1, 1000, True, now_ms=0), ReadOutcome)
    assert partition.fetch_offset_for_timestamp(-3, READ_UNCOMMITTED, -1) == TimestampOffset(500, 1, 1)


def test_a_new_leader_behind_its_epoch_start_answers_offset_not_available() -> None:
    first = PartitionState(leader=NODE, leader_epoch=1, partition_epoch=0, replicas=(NODE, 2), isr=(NODE, 2))
    partition, log = make(first)
    log.next_count = 5
    partition.append_records_to_leader(b"x", 1, 0)  # the follower has fetched nothing: HW 0
    again = PartitionState(leader=NODE, leader_epoch=2, partition_epoch=1, replicas=(NODE, 2), isr=(NODE, 2))
    partition.update_state(again, now_ms=0)
    assert partition.high_watermark == 0 and partition.leader_epoch_start_offset == 5
    latest = partition.fetch_offset_for_timestamp(-1, READ_UNCOMMITTED, -1)
    assert isinstance(latest, PartitionError) and latest.code == ErrorCode.offset_not_available
    by_time = partition.fetch_offset_for_timestamp(0, READ_UNCOMMITTED, -1)
    assert isinstance(by_time, PartitionError) and by_time.code == ErrorCode.offset_not_available
    assert not isinstance(partition.fetch_offset_for_timestamp(-2, READ_UNCOMMITTED, -1), PartitionError)
    assert partition.fetch_offset_for_timestamp(-1, READ_UNCOMMITTED, -1, from_replica=True) == TimestampOffset(-1, 5, 2)
    assert isinstance(partition.fetch_for_follower(2, 5, -1, -1, 1000, True, now_ms=0), ReadOutcome)
    assert partition.fetch_offset_for_timestamp(-1, READ_UNCOMMITTED, -1) == TimestampOffset(-1, 5, 2)


def test_a_mirror_leader_truncating_below_its_epoch_start_lowers_it() -> None:
    state = PartitionState(leader=NODE, leader_epoch=1, partition_epoch=0, replicas=(NODE, 2), isr=(NODE, 2))
    partition, log = make(state)
    log.next_count = 5
    partition.append_records_to_leader(b"x", 1, 0)
    partition.update_state(PartitionState(leader=NODE, leader_epoch=2, partition_epoch=1, replicas=(NODE, 2),
                                          isr=(NODE, 2)), now_ms=0)
    assert partition.leader_epoch_start_offset == 5
    partition.truncate_to(2)  # KIP-1279: the mirror leader follows its source's divergence
    assert partition.leader_epoch_start_offset == 2
    assert isinstance(partition.fetch_for_follower(2, 2, -1, -1, 1000, True, now_ms=0), ReadOutcome)
    assert partition.fetch_offset_for_timestamp(-1, READ_UNCOMMITTED, -1) == TimestampOffset(-1, 2, 2)


def mirror_partition_led_from(log_end_offset: int) -> tuple[Partition, FakeLog]:
    """A mirror topic's partition (its log keeps the source's epoch 0) that follows broker 2
    until it becomes the leader, at epoch 3, holding `log_end_offset` records."""
    as_follower = PartitionState(leader=2, leader_epoch=2, partition_epoch=0, replicas=(NODE, 2), isr=(NODE, 2))
    partition, log = make(as_follower)
    partition.assigns_leader_epoch = False
    log.next_count = log_end_offset
    log.append_as_leader(b"x", 0)
    partition.update_state(PartitionState(leader=NODE, leader_epoch=3, partition_epoch=1, replicas=(NODE, 2),
                                          isr=(NODE, 2)), now_ms=0)
    return partition, log


def test_a_follower_ahead_of_a_new_mirror_leaders_start_truncates_to_it_before_fetching() -> None:
    """Broker 2 led before and copied offsets 5-7 from the source; the source compacted them
    away before this leader fetched past them. Same source epoch, different records: only the
    leader's start offset tells the follower where to truncate."""
    partition, log = mirror_partition_led_from(5)
    log.next_count = 10
    log.append_as_leader(b"y", 0)  # mirrored on from the source: offsets 5-14
    ahead = partition.fetch_for_follower(2, 8, 0, 3, 1000, True, now_ms=0)
    assert isinstance(ahead, ReadOutcome) and ahead.diverging_epoch == EpochEndOffset(0, 5) and not ahead.records
    no_epoch = partition.fetch_for_follower(2, 8, -1, 3, 1000, True, now_ms=0)
    assert isinstance(no_epoch, ReadOutcome) and no_epoch.diverging_epoch == EpochEndOffset(-1, 5)
    at_start = partition.fetch_for_follower(2, 5, 0, 3, 1000, True, now_ms=0)
    assert isinstance(at_start, ReadOutcome) and at_start.diverging_epoch is None and at_start.records == b"y"
    # From here on what the follower holds came from this leader.
    later = partition.fetch_for_follower(2, 15, 0, 3, 1000, True, now_ms=0)
    assert isinstance(later, ReadOutcome) and later.diverging_epoch is None


def test_a_new_mirror_leaders_follower_at_or_below_its_start_fetches_at_once() -> None:
    partition, _ = mirror_partition_led_from(5)
    for offset in (5, 3):
        fetched = partition.fetch_for_follower(2, offset, 0, 3, 1000, True, now_ms=0)
        assert isinstance(fetched, ReadOutcome) and fetched.diverging_epoch is None


def test_a_mirror_leader_that_truncates_checks_its_followers_again() -> None:
    partition, log = mirror_partition_led_from(5)
    assert isinstance(partition.fetch_for_follower(2, 5, 0, 3, 1000, True, now_ms=0), ReadOutcome)
    partition.truncate_to(3)  # the source diverged: the leader fetches offsets 3 on again
    log.next_count = 10
    log.append_as_leader(b"z", 0)
    ahead = partition.fetch_for_follower(2, 5, 0, 3, 1000, True, now_ms=0)
    assert isinstance(ahead, ReadOutcome) and ahead.diverging_epoch == EpochEndOffset(0, 3)
