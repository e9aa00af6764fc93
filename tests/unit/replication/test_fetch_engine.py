"""The fetch engine alone, over a fake local replica: every truncation rule, resets, fencing,
backoff and stale answers."""

from uuid import uuid4

import pytest

from kmirror.protocol.errors import ErrorCode
from kmirror.records.builder import build_batch
from kmirror.replication.fetcher.engine import FetchedPartition, FetchEngine, FetchStates
from kmirror.replication.fetcher.policy import FetchPolicy
from kmirror.replication.fetcher.state import FetchPhase, IllegalFetchTransition, PartitionFetchState
from kmirror.replication.outcomes import EpochEndOffset
from kmirror.types import TopicPartition

TP = TopicPartition("t", 0)


class FakeLocal:
    """A log as a list of (offset, epoch); epochs start where their first record is."""

    def __init__(self, epochs: list[int], hw: int = 0, start: int = 0, empty_epoch: int | None = None) -> None:
        self.records = [(start + i, e) for i, e in enumerate(epochs)]
        self.empty_epoch = empty_epoch  # an epoch started at the log end, without records
        self.hw = hw
        self.start = start
        self.appended: list[bytes] = []
        self.append_error = ErrorCode.none

    def log_end_offset(self, tp):
        return self.records[-1][0] + 1 if self.records else self.start

    def high_watermark(self, tp):
        return self.hw

    def log_start_offset(self, tp):
        return self.start

    def latest_epoch(self, tp):
        if self.empty_epoch is not None:
            return self.empty_epoch
        return self.records[-1][1] if self.records else None

    def end_offset_for_epoch(self, tp, epoch):
        epochs = sorted({e for _, e in self.records})
        if not epochs or epoch < 0:
            return None
        if epoch == epochs[-1]:
            return epoch, self.log_end_offset(tp)
        higher = [e for e in epochs if e > epoch]
        if not higher:
            return None
        floor = [e for e in epochs if e <= epoch]
        next_start = min(o for o, e in self.records if e == higher[0])
        return (floor[-1] if floor else epoch), next_start

    def truncate_to(self, tp, offset):
        self.empty_epoch = None  # it starts at the log end: at or after any truncation offset
        self.records = [(o, e) for o, e in self.records if o < offset]
        self.hw = min(self.hw, offset)

    def truncate_fully_and_start_at(self, tp, offset):
        self.records, self.start, self.hw = [], offset, offset

    def append(self, tp, records):
        if self.append_error != ErrorCode.none:
            return self.append_error
        self.appended.append(bytes(records))
        epoch = records[0]
        for _ in range(records[1]):
            self.records.append((self.log_end_offset(tp), epoch))
        return ErrorCode.none

    def update_high_watermark(self, tp, hw):
        self.hw = min(hw, self.log_end_offset(tp))

    def maybe_increment_log_start_offset(self, tp, offset):
        pass


def engine(local: FakeLocal, truncate_on_fetch: bool = True) -> FetchEngine:
    e = FetchEngine(local, FetchPolicy(replica_id=2, backoff_ms=100, truncate_on_fetch=truncate_on_fetch))
    e.add_partition(TP, uuid4(), leader_epoch=5)
    return e


def test_a_log_with_an_epoch_fetches_at_once_with_its_last_epoch() -> None:
    e = engine(FakeLocal([1, 1, 3]))
    plan = e.fetch_plan(0)
    assert plan is not None
    (p,) = plan.partitions
    assert (p.fetch_offset, p.last_fetched_epoch, p.current_leader_epoch) == (3, 3, 5)


def test_an_empty_log_truncates_to_its_hw_then_fetches() -> None:
    local = FakeLocal([])
    e = engine(local)
    assert e.states[TP].phase is FetchPhase.TRUNCATING
    assert e.epoch_queries(0) == []
    assert e.states[TP].phase is FetchPhase.FETCHING


@pytest.mark.parametrize(
    ("leader", "follower_epochs", "expected_end", "done"),
    [
        (EpochEndOffset(3, -1), [1, 1, 3, 3], 1, True),  # end undefined: to the HW (1)
        (EpochEndOffset(-1, 2), [1, 1, 3, 3], 2, True),  # epoch undefined: min(L, LEO)
        (EpochEndOffset(3, 3), [1, 1, 3, 3, 3], 3, True),  # same epoch: min(L, own end of E)
        (EpochEndOffset(2, 2), [1, 1, 3, 3], 2, False),  # follower's largest epoch <= 2 is 1
        (EpochEndOffset(0, 0), [1, 1], 0, True),  # below the follower's first epoch
    ],
)
def test_truncation_rules_through_offsets_for_leader_epoch(
    leader: EpochEndOffset, follower_epochs: list[int], expected_end: int, done: bool
) -> None:
    local = FakeLocal(follower_epochs, hw=1)
    e = engine(local, truncate_on_fetch=False)
    (query,) = e.epoch_queries(0)
    assert query.leader_epoch == follower_epochs[-1]
    e.handle_epoch_end_offsets({TP: leader}, 0)
    assert local.log_end_offset(TP) == expected_end
    assert e.states[TP].phase is (FetchPhase.FETCHING if done else FetchPhase.TRUNCATING)


def test_diverging_epoch_in_a_fetch_truncates_and_refetches_from_the_new_end() -> None:
    local = FakeLocal([1, 1, 1, 1])
    e = engine(local)
    plan = e.fetch_plan(0)
    changed = e.handle_fetch_response(plan, {TP: FetchedPartition(ErrorCode.none, diverging_epoch=EpochEndOffset(1, 2))}, 0)
    assert changed == {TP} and local.log_end_offset(TP) == 2
    (p,) = e.fetch_plan(0).partitions
    assert (p.fetch_offset, p.last_fetched_epoch) == (2, 1)


def test_records_are_appended_and_the_hw_follows_the_leader() -> None:
    local = FakeLocal([1])
    e = engine(local)
    plan = e.fetch_plan(0)
    e.handle_fetch_response(plan, {TP: FetchedPartition(ErrorCode.none, bytes([5, 3]), high_watermark=9)}, 0)
    assert local.log_end_offset(TP) == 4 and local.hw == 4
    (p,) = e.fetch_plan(0).partitions
    assert (p.fetch_offset, p.last_fetched_epoch) == (4, 5)


def test_answers_to_an_older_fetch_state_are_ignored() -> None:
    local = FakeLocal([1])
    e = engine(local)
    plan = e.fetch_plan(0)
    e.add_partition(TP, uuid4(), leader_epoch=6)  # the leader changed meanwhile
    assert e.handle_fetch_response(plan, {TP: FetchedPartition(ErrorCode.none, bytes([5, 3]))}, 0) == set()
    assert local.appended == []


def test_out_of_range_resets_from_the_leaders_log_bounds() -> None:
    ahead = FakeLocal([1, 1, 1, 1, 1])
    e = engine(ahead)
    e.handle_fetch_response(e.fetch_plan(0), {TP: FetchedPartition(ErrorCode.offset_out_of_range)}, 0)
    assert e.fetch_plan(0) is None
    (q,) = e.reset_queries(0)
    e.handle_leader_offsets(TP, leader_start=0, leader_end=3)
    assert ahead.log_end_offset(TP) == 3 and e.fetch_plan(0).partitions[0].fetch_offset == 3

    behind = FakeLocal([1])
    e = engine(behind)
    e.handle_fetch_response(e.fetch_plan(0), {TP: FetchedPartition(ErrorCode.offset_out_of_range)}, 0)
    e.handle_leader_offsets(TP, leader_start=10, leader_end=20)
    assert behind.log_end_offset(TP) == 10 and behind.start == 10


def test_fenced_leader_epoch_stops_the_partition_until_re_added() -> None:
    e = engine(FakeLocal([1]))
    e.handle_fetch_response(e.fetch_plan(0), {TP: FetchedPartition(ErrorCode.fenced_leader_epoch)}, 0)
    assert e.states[TP].phase is FetchPhase.FENCED and e.fetch_plan(10**9) is None
    with pytest.raises(IllegalFetchTransition):
        e.states[TP].to(FetchPhase.FETCHING)
    e.add_partition(TP, uuid4(), leader_epoch=6)
    assert e.fetch_plan(0) is not None


@pytest.mark.parametrize("error", [ErrorCode.not_leader_or_follower, ErrorCode.unknown_leader_epoch, ErrorCode.corrupt_message])
def test_other_errors_back_off(error: ErrorCode) -> None:
    e = engine(FakeLocal([1]))
    e.handle_fetch_response(e.fetch_plan(0), {TP: FetchedPartition(error)}, 0)
    assert e.fetch_plan(99) is None and e.next_ready_ms() == 100
    assert e.fetch_plan(100) is not None


def test_append_failure_and_request_failure_back_off() -> None:
    local = FakeLocal([1])
    local.append_error = ErrorCode.corrupt_message
    e = engine(local)
    e.handle_fetch_response(e.fetch_plan(0), {TP: FetchedPartition(ErrorCode.none, bytes([1, 1]))}, 0)
    assert e.fetch_plan(50) is None
    e.handle_failure([TP], 100)
    assert e.fetch_plan(150) is None and e.fetch_plan(200) is not None


def test_a_later_partition_cut_inside_its_first_batch_is_fetched_again_without_backoff() -> None:
    batch = build_batch([(b"k", b"v" * 200, (), 1)] * 3)
    tp1 = TopicPartition("t", 1)
    local = FakeLocal([1])
    e = engine(local)
    e.add_partition(tp1, uuid4(), leader_epoch=5)
    plan = e.fetch_plan(0)
    before = {p.topic_partition: p.fetch_offset for p in plan.partitions}
    # TP used the response's bytes (whole batches); tp1 got the rest: part of one batch.
    e.handle_fetch_response(plan, {TP: FetchedPartition(ErrorCode.none, bytes([5, 2])),
                                   tp1: FetchedPartition(ErrorCode.none, batch[:100], high_watermark=3)}, 0)
    assert local.appended == [bytes([5, 2])]  # the cut batch was not handed to the log
    after = {p.topic_partition: p.fetch_offset for p in e.fetch_plan(0).partitions}
    assert after[tp1] == before[tp1] and after[TP] == before[TP] + 2  # tp1 ready again at once


def test_the_first_partition_with_records_cut_inside_its_batch_is_malformed() -> None:
    local = FakeLocal([1])
    local.append_error = ErrorCode.corrupt_message  # what the log answers for a cut batch
    e = engine(local)
    e.handle_fetch_response(e.fetch_plan(0), {TP: FetchedPartition(ErrorCode.none, build_batch(
        [(b"k", b"v" * 200, (), 1)])[:100])}, 0)
    assert e.fetch_plan(50) is None and e.next_ready_ms() == 100  # reported and backed off


def test_a_wide_answer_is_applied_a_step_at_a_time_and_rechecks_each_partition_when_its_turn_comes() -> None:
    local = FakeLocal([1])
    e = engine(local)
    tps = [TP] + [TopicPartition("t", p) for p in range(1, 450)]
    for tp in tps[1:]:
        e.add_partition(tp, uuid4(), leader_epoch=5)
    plan = e.fetch_plan(0)
    batch = build_batch([(b"k", b"v", (), 1)], partition_leader_epoch=5)  # whole: none is cut (KIP-74)
    answer = {tp: FetchedPartition(ErrorCode.none, batch) for tp in tps}
    steps = e.fetch_response_steps(plan, answer, 0, partitions_per_step=200)
    assert next(steps) == set(tps[:200]) and len(local.appended) == 200  # nothing beyond the step yet
    e.add_partition(tps[-1], uuid4(), leader_epoch=6)  # between steps: a new leader for the last partition
    assert list(steps) == [set(tps[200:400]), set(tps[400:449])]  # its answer is stale: ignored
    assert len(local.appended) == 449


def test_fetch_states_keep_the_truncating_and_resetting_partitions_aside() -> None:
    states = FetchStates()
    tps = [TopicPartition("t", p) for p in range(3)]
    topic_id = uuid4()
    for tp in tps:
        states[tp] = PartitionFetchState(tp, topic_id, 0, 0, -1, FetchPhase.TRUNCATING)
    assert states.truncating == set(tps) and not states.resetting
    states[tps[0]] = states[tps[0]].to(FetchPhase.FETCHING)
    states[tps[1]] = states[tps[1]].to(FetchPhase.RESETTING)
    assert states.truncating == {tps[2]} and states.resetting == {tps[1]}
    states.pop(tps[2], None)
    del states[tps[1]]
    assert not states.truncating and not states.resetting and list(states) == [tps[0]]


def test_a_diverging_epoch_at_the_log_end_drops_an_epoch_started_there_without_records() -> None:
    """This broker led epoch 4 from offset 4 and wrote nothing before another leader took
    epoch 5 at the same offset. The leader answers last fetched epoch 4 with (2, 4): nothing
    to cut, but epoch 4 must go, or every later fetch sends it and gets the same answer."""
    local = FakeLocal([1, 1, 2, 2], hw=4, empty_epoch=4)
    e = engine(local)
    (p,) = e.fetch_plan(0).partitions
    assert (p.fetch_offset, p.last_fetched_epoch) == (4, 4)
    e.handle_fetch_response(e.fetch_plan(0), {TP: FetchedPartition(ErrorCode.none, diverging_epoch=EpochEndOffset(2, 4))}, 0)
    (p,) = e.fetch_plan(0).partitions
    assert (p.fetch_offset, p.last_fetched_epoch) == (4, 2) and local.log_end_offset(TP) == 4
