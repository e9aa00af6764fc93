"""Leader/follower partition logic over the real Log: roles, HW, ISR changes, truncation."""

from uuid import uuid4

import pytest

from kmirror.log.checkpoint import LeaderEpochCheckpoint
from kmirror.log.config import LogConfig
from kmirror.log.log import Log
from kmirror.ports import ManualClock
from kmirror.protocol.errors import ErrorCode
from kmirror.records.builder import build_batch
from kmirror.replication.outcomes import (
    READ_UNCOMMITTED,
    AppendOutcome,
    EpochEndOffset,
    PartitionError,
    ReadOutcome,
)
from kmirror.replication.partition import Partition, PartitionState
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.types import TopicPartition

TP = TopicPartition("t", 0)
LAG_MS = 30_000


def state(leader: int = 1, epoch: int = 1, pe: int = 0, isr: tuple[int, ...] = (1, 2, 3)) -> PartitionState:
    return PartitionState(leader=leader, leader_epoch=epoch, partition_epoch=pe, replicas=(1, 2, 3), isr=isr)


def make(st: PartitionState, node: int = 1, min_isr: int = 1) -> tuple[Partition, Log, MemoryFileSystem]:
    fs = MemoryFileSystem()
    log = Log.open(fs, "/logs/t-0", TP, LogConfig(), ManualClock(), uuid4())
    p = Partition(TP, uuid4(), log, node, st, min_isr, LAG_MS)
    p.update_state(st, now_ms=0)
    return p, log, fs


def batch(n: int = 1) -> bytes:
    return build_batch([(b"k", b"v", (), 0)] * n)


def fetch(p: Partition, replica: int, offset: int, last_epoch: int = -1, now: int = 0, current: int = -1) -> ReadOutcome | PartitionError:
    return p.fetch_for_follower(replica, offset, last_epoch, current, 1 << 20, True, now_ms=now)


def test_becoming_leader_writes_the_epoch_start_at_the_log_end_offset() -> None:
    p, log, fs = make(state(leader=2, epoch=1), node=1)
    log.append_as_follower(_at(batch(3), base_offset=0, epoch=1))
    p.update_state(state(leader=1, epoch=2, pe=1), now_ms=0)
    assert [(e.epoch, e.start_offset) for e in log.epoch_cache.entries] == [(1, 0), (2, 3)]
    assert LeaderEpochCheckpoint(fs, "/logs/t-0").read() == log.epoch_cache
    assert p.leader_epoch_start_offset == 3


def _at(records: bytes, base_offset: int, epoch: int) -> bytes:
    from kmirror.records.batch import set_base_offset, set_partition_leader_epoch

    buf = bytearray(records)
    set_base_offset(buf, 0, base_offset)
    set_partition_leader_epoch(buf, 0, epoch)
    return bytes(buf)


def test_follower_fetch_reads_to_leo_and_hw_is_min_over_isr() -> None:
    p, log, _ = make(state())
    p.append_records_to_leader(batch(5), -1, 0)
    assert p.high_watermark == 0
    r2 = fetch(p, 2, 0)
    assert isinstance(r2, ReadOutcome) and r2.size > 0  # data beyond the HW goes to followers
    assert p.high_watermark == 0  # replica 3 holds it back
    fetch(p, 2, 5)
    fetch(p, 3, 3)
    assert p.high_watermark == 3
    fetch(p, 3, 5)
    assert p.high_watermark == 5
    assert p.replica_log_end_offsets == {2: 5, 3: 5}


def test_follower_fetch_from_unknown_replica_or_on_follower_is_refused() -> None:
    p, _, _ = make(state())
    out = fetch(p, 9, 0)
    assert isinstance(out, PartitionError) and out.code == ErrorCode.not_leader_or_follower
    f, _, _ = make(state(leader=2), node=1)
    out = fetch(f, 3, 0)
    assert isinstance(out, PartitionError) and out.code == ErrorCode.not_leader_or_follower


@pytest.mark.parametrize(("current", "code"), [(0, ErrorCode.fenced_leader_epoch), (2, ErrorCode.unknown_leader_epoch)])
def test_follower_fetch_with_wrong_current_leader_epoch(current: int, code: ErrorCode) -> None:
    p, _, _ = make(state(epoch=1))
    out = fetch(p, 2, 0, current=current)
    assert isinstance(out, PartitionError) and out.code == code


def leader_with_epochs() -> Partition:
    """Leader log: epoch 1 at [0, 5), epoch 3 at [5, 8)."""
    p, log, _ = make(state(leader=2, epoch=1))
    log.append_as_follower(_at(batch(5), 0, 1))
    log.append_as_follower(_at(batch(3), 5, 3))
    p.update_state(state(leader=1, epoch=3, pe=1), now_ms=0)
    return p


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (-1, EpochEndOffset(-1, -1)),  # undefined epoch
        (3, EpochEndOffset(3, 8)),  # the latest epoch: ends at the LEO
        (4, EpochEndOffset(-1, -1)),  # above every epoch
        (0, EpochEndOffset(0, 0)),  # below the earliest: its start offset
        (1, EpochEndOffset(1, 5)),  # a known older epoch: where the next one starts
        (2, EpochEndOffset(1, 5)),  # a gap: the largest epoch below, ending where 3 starts
    ],
)
def test_every_branch_of_the_epoch_end_offset_lookup(requested: int, expected: EpochEndOffset) -> None:
    assert leader_with_epochs().last_offset_for_leader_epoch(-1, requested) == expected


@pytest.mark.parametrize(
    ("last_epoch", "offset", "diverging"),
    [
        (1, 5, None),  # the follower ends epoch 1 where the leader does
        (1, 7, EpochEndOffset(1, 5)),  # the follower has more epoch-1 data than the leader
        (2, 6, EpochEndOffset(1, 5)),  # an epoch the leader never had
        (0, 2, EpochEndOffset(0, 0)),  # below the leader's earliest epoch
        (3, 8, None),
        (-1, 6, None),  # no last fetched epoch (Fetch < v12): no check
    ],
)
def test_diverging_epoch_in_follower_fetch(last_epoch: int, offset: int, diverging: EpochEndOffset | None) -> None:
    out = fetch(leader_with_epochs(), 2, offset, last_epoch)
    assert isinstance(out, ReadOutcome)
    assert out.diverging_epoch == diverging
    if diverging is not None:
        assert out.size == 0


def test_last_fetched_epoch_above_the_leader_is_offset_out_of_range() -> None:
    out = fetch(leader_with_epochs(), 2, 8, last_epoch=4)
    assert isinstance(out, PartitionError) and out.code == ErrorCode.offset_out_of_range


def test_isr_expand_is_pending_until_committed_and_counts_for_hw_meanwhile() -> None:
    p, _, _ = make(state(isr=(1, 2)))
    p.append_records_to_leader(batch(4), -1, 0)
    fetch(p, 2, 4)
    assert p.high_watermark == 4
    fetch(p, 3, 2)
    assert p.pending_alter_partition() is None  # below the HW: not in sync
    fetch(p, 3, 4)
    item = p.pending_alter_partition()
    assert item is not None and item.new_isr == (1, 2, 3) and (item.leader_epoch, item.partition_epoch) == (1, 0)
    assert p.maximal_isr == {1, 2, 3} and p.isr == (1, 2)
    assert p.maybe_expand_isr(3, 0) is None  # one change in flight
    committed = state(isr=(1, 2, 3), pe=1)
    assert p.handle_alter_partition_response(item, ErrorCode.none, committed)
    assert p.isr == (1, 2, 3) and p.partition_epoch == 1 and p.isr_expands == 1
    assert not p.isr_state.is_inflight


def test_a_caught_up_follower_the_controller_would_refuse_is_never_proposed() -> None:
    """Kafka `isReplicaIsrEligible`: a follower in controlled shutdown (or fenced, or fetching
    with another broker epoch) is not proposed, so no AlterPartition is refused with
    INELIGIBLE_REPLICA and retried on every fetch."""
    p, _, _ = make(state(isr=(1, 2)))
    eligible = {3: False}
    p.isr_eligible = lambda broker_id, _epoch: eligible.get(broker_id, True)
    p.append_records_to_leader(batch(4), -1, 0)
    fetch(p, 2, 4)
    for _ in range(3):
        fetch(p, 3, 4)
        assert p.pending_alter_partition() is None and p.maximal_isr == {1, 2}
    eligible[3] = True  # the image brings its new registration
    fetch(p, 3, 4)
    item = p.pending_alter_partition()
    assert item is not None and item.new_isr == (1, 2, 3)


def test_expand_needs_the_start_of_the_leader_epoch() -> None:
    p, log, _ = make(state(leader=2, epoch=1, isr=(2, 1)))
    log.append_as_follower(_at(batch(4), 0, 1))
    p.update_state(state(leader=1, epoch=2, pe=1, isr=(1,)), now_ms=0)
    # follower 3 at the HW (0) but behind the epoch start (4)
    fetch(p, 3, 0)
    assert p.pending_alter_partition() is None
    fetch(p, 3, 4)
    assert p.pending_alter_partition() is not None


def test_isr_shrinks_lagging_followers_after_replica_lag_time_max_ms() -> None:
    p, _, _ = make(state())
    p.append_records_to_leader(batch(2), -1, 0)
    fetch(p, 2, 2, now=1000)
    fetch(p, 3, 0, now=1000)  # behind the leader's LEO
    assert p.maybe_shrink_isr(LAG_MS) is None  # ISR members got a fresh lag window at epoch start
    fetch(p, 2, 2, now=LAG_MS + 1)
    item = p.maybe_shrink_isr(LAG_MS + 1)
    assert item is not None and item.new_isr == (1, 2)
    # while the shrink is pending the committed ISR (the maximal one) still holds the HW
    assert p.high_watermark == 0
    p.handle_alter_partition_response(item, ErrorCode.none, state(isr=(1, 2), pe=1))
    assert p.isr == (1, 2) and p.isr_shrinks == 1
    assert p.high_watermark == 2


def test_follower_fetching_at_leo_stays_in_sync() -> None:
    p, _, _ = make(state())
    p.append_records_to_leader(batch(2), -1, 0)
    for now in (10_000, 25_000, 40_000, 70_000):
        fetch(p, 2, 2, now=now)
        fetch(p, 3, 2, now=now)
    assert p.maybe_shrink_isr(70_000) is None


@pytest.mark.parametrize("error", [ErrorCode.fenced_leader_epoch, ErrorCode.invalid_update_version])
def test_fenced_alter_partition_keeps_the_change_pending_until_the_image(error: ErrorCode) -> None:
    p, _, _ = make(state(isr=(1, 2)))
    fetch(p, 3, 0)
    item = p.pending_alter_partition()
    assert item is not None
    p.handle_alter_partition_response(item, error)
    assert p.isr_state.is_inflight
    p.update_state(state(leader=1, epoch=2, pe=2, isr=(1, 2)), now_ms=0)
    assert not p.isr_state.is_inflight


def test_other_alter_partition_errors_revert_to_the_committed_isr() -> None:
    p, _, _ = make(state(isr=(1, 2)))
    fetch(p, 3, 0)
    item = p.pending_alter_partition()
    assert item is not None
    p.handle_alter_partition_response(item, ErrorCode.ineligible_replica)
    assert not p.isr_state.is_inflight and p.isr == (1, 2)


def test_acks_all_completion_and_not_enough_replicas_after_append() -> None:
    p, _, _ = make(state(isr=(1, 2)), min_isr=2)
    out = p.append_records_to_leader(batch(1), -1, 0)
    assert isinstance(out, AppendOutcome)
    assert p.check_enough_replicas_reach_offset(1) == (False, ErrorCode.none)
    fetch(p, 2, 1)
    assert p.check_enough_replicas_reach_offset(1) == (True, ErrorCode.none)
    p.append_records_to_leader(batch(1), -1, 0)
    item = p.maybe_shrink_isr(LAG_MS + 1)
    assert item is not None and item.new_isr == (1,)
    p.handle_alter_partition_response(item, ErrorCode.none, state(isr=(1,), pe=1))
    assert p.check_enough_replicas_reach_offset(2) == (True, ErrorCode.not_enough_replicas_after_append)
    again = p.append_records_to_leader(batch(1), -1, 0)
    assert isinstance(again, PartitionError) and again.code == ErrorCode.not_enough_replicas
    p.update_state(state(leader=2, epoch=2, pe=2), now_ms=0)
    assert p.check_enough_replicas_reach_offset(3) == (True, ErrorCode.not_leader_or_follower)


def test_follower_refuses_produce_and_leader_only_reads_but_serves_rack_reads_to_its_hw() -> None:
    p, log, _ = make(state(leader=2), node=1)
    refused = p.append_records_to_leader(batch(1), 1, 0)
    assert isinstance(refused, PartitionError) and refused.code == ErrorCode.not_leader_or_follower
    assert isinstance(p.append_records_as_follower(_at(batch(4), 0, 1)), AppendOutcome)
    assert p.update_follower_high_watermark(9) and p.high_watermark == 4  # bounded by its LEO
    p.update_follower_high_watermark(2)
    out = p.read(0, 1 << 20, READ_UNCOMMITTED, -1, True)
    assert isinstance(out, PartitionError) and out.code == ErrorCode.not_leader_or_follower
    out = p.read(0, 1 << 20, READ_UNCOMMITTED, -1, True, fetch_only_from_leader=False)
    assert isinstance(out, ReadOutcome) and out.high_watermark == 2 and out.size > 0


def test_follower_truncation_and_role_changes() -> None:
    p, log, _ = make(state(leader=2), node=1)
    p.append_records_as_follower(_at(batch(2), 0, 1))
    p.append_records_as_follower(_at(batch(2), 2, 1))
    assert p.truncate_to(2) and log.log_end_offset == 2
    change = p.update_state(state(leader=3, epoch=2, pe=1), now_ms=0)
    assert change.follow_leader and not change.became_leader
    assert p.update_state(state(leader=2, epoch=1, pe=5), now_ms=0).follow_leader is False  # stale epoch ignored
    assert p.leader_id == 3
    change = p.update_state(state(leader=1, epoch=3, pe=2), now_ms=0)
    assert change.became_leader and p.is_leader
    assert log.epoch_cache.latest_entry is not None and (log.epoch_cache.latest_entry.epoch, log.epoch_cache.latest_entry.start_offset) == (3, 2)


def test_new_leader_forgets_follower_offsets_so_hw_waits_for_their_fetches() -> None:
    p, log, _ = make(state(leader=2), node=1)
    p.append_records_as_follower(_at(batch(4), 0, 1))
    p.update_follower_high_watermark(1)
    p.update_state(state(leader=1, epoch=2, pe=1), now_ms=0)
    assert p.high_watermark == 1
    assert p.replica_log_end_offsets == {2: -1, 3: -1}
    fetch(p, 2, 4)
    fetch(p, 3, 4)
    assert p.high_watermark == 4


def test_replication_metrics_over_partitions() -> None:
    from kmirror.replication.metrics import replication_metrics

    p, _, _ = make(state(isr=(1, 2)), min_isr=2)
    p.append_records_to_leader(batch(3), 1, 0)
    fetch(p, 2, 3, now=0)
    fetch(p, 3, 1, now=0)
    follower, _, _ = make(state(leader=2), node=1)
    m = replication_metrics([p, follower], now_ms=500)
    assert m["UnderReplicatedPartitions"] == 1 and m["AtMinIsrPartitionCount"] == 1
    assert m["UnderMinIsrPartitionCount"] == 0 and m["LeaderCount"] == 1 and m["PartitionCount"] == 2
    assert m["MaxLag"] == 2 and m["ReplicaLagTimeMax"] == 500
    item = p.maybe_expand_isr(3, 0)
    assert item is None  # 3 is behind the HW
