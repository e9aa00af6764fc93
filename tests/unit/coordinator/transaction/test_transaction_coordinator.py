"""The sans-IO transaction coordinator: KIP-98's lifecycle driven event by event."""

from __future__ import annotations

import itertools
import re

import pytest

from kmirror.coordinator.transaction import records
from kmirror.coordinator.transaction.config import TransactionConfig
from kmirror.coordinator.transaction.coordinator import TransactionCoordinator
from kmirror.coordinator.transaction.results import InitProducerIdResult, TxnOutput
from kmirror.coordinator.transaction.state import TransactionState as S
from kmirror.ports import ManualClock
from kmirror.protocol.errors import ErrorCode as E
from kmirror.types import TopicPartition

TP0 = TopicPartition("payments", 0)
TP1 = TopicPartition("payments", 1)


class Harness:
    """Runs the core's outputs the way the shell does: appends succeed (or fail when told)
    into an in-memory log, markers are collected, responses are kept by request id."""

    def __init__(self, config: TransactionConfig | None = None) -> None:
        self.clock = ManualClock()
        ids = itertools.count(1000)
        self.core = TransactionCoordinator(config or TransactionConfig(transaction_state_log_num_partitions=1),
                                           self.clock, lambda: next(ids), lambda p: 7)
        self.log: list[tuple[bytes, bytes | None]] = []
        self.markers: list = []
        self.responses: dict[int, object] = {}
        self.fail_appends: E | None = None
        self.rid = itertools.count(1)
        self.core.begin_load(0)
        self.run(self.core.complete_load(0, []))

    def run(self, out: TxnOutput) -> None:
        for append in out.appends:
            if self.fail_appends is None:
                self.log.extend(append.records)
            self.run(self.core.on_append_completed(append.ticket, self.fail_appends or E.none))
        self.markers.extend(out.markers)
        self.responses.update(out.responses)

    def call(self, method: str, **kwargs: object) -> object:
        rid = next(self.rid)
        self.run(getattr(self.core, method)(rid, **kwargs))
        return self.responses[rid]

    def init(self, txn_id: str = "t", timeout_ms: int = 60_000, **kw: object) -> InitProducerIdResult:
        result = self.call("init_producer_id", transactional_id=txn_id, transaction_timeout_ms=timeout_ms, **kw)
        assert isinstance(result, InitProducerIdResult)
        return result

    def write_all_markers(self) -> None:
        markers, self.markers = self.markers, []
        for marker in markers:
            for tp in sorted(marker.partitions, key=str):
                self.run(self.core.on_marker_written(marker, tp))

    def state(self, txn_id: str = "t") -> S:
        return self.core.transactions[txn_id].state


def test_init_allocates_a_producer_id_and_bumps_the_epoch_on_each_init() -> None:
    h = Harness()
    first = h.init()
    assert (first.error, first.producer_id, first.producer_epoch) == (E.none, 1000, 0)
    second = h.init()
    assert (second.producer_id, second.producer_epoch) == (1000, 1)
    assert h.state() is S.EMPTY
    # persisted: the last record of the id says Empty with epoch 1
    key, value = h.log[-1]
    assert records.parse_key(key) == "t"
    assert value is not None and records.parse_value(value).producer_epoch == 1


def test_commit_goes_through_prepare_markers_and_complete() -> None:
    h = Harness()
    pid = h.init()
    assert h.call("add_partitions", transactional_id="t", producer_id=pid.producer_id, producer_epoch=0,
                  partitions=[TP0, TP1]) == E.none
    assert h.state() is S.ONGOING
    assert h.call("end_txn", transactional_id="t", producer_id=pid.producer_id, producer_epoch=0,
                  committed=True) == E.none
    assert h.state() is S.PREPARE_COMMIT
    [marker] = h.markers
    assert marker.commit and marker.partitions == {TP0, TP1} and marker.coordinator_epoch == 7
    h.write_all_markers()
    assert h.state() is S.COMPLETE_COMMIT
    assert h.core.transactions["t"].partitions == set()
    # a retried EndTxn(commit) is fine, an abort now is not
    assert h.call("end_txn", transactional_id="t", producer_id=pid.producer_id, producer_epoch=0,
                  committed=True) == E.none
    assert h.call("end_txn", transactional_id="t", producer_id=pid.producer_id, producer_epoch=0,
                  committed=False) == E.invalid_txn_state


def test_end_txn_errors_follow_kafka() -> None:
    h = Harness()
    assert h.call("end_txn", transactional_id="nobody", producer_id=1, producer_epoch=0,
                  committed=True) == E.invalid_producer_id_mapping
    pid = h.init()
    assert h.call("end_txn", transactional_id="t", producer_id=pid.producer_id, producer_epoch=0,
                  committed=True) == E.invalid_txn_state  # nothing begun
    assert h.call("end_txn", transactional_id="t", producer_id=pid.producer_id, producer_epoch=5,
                  committed=True) == E.producer_fenced
    assert h.call("end_txn", transactional_id="t", producer_id=999, producer_epoch=0,
                  committed=True) == E.invalid_producer_id_mapping
    assert h.call("end_txn", transactional_id="", producer_id=999, producer_epoch=0,
                  committed=True) == E.invalid_request


def test_init_validates_timeout_and_transactional_id() -> None:
    h = Harness(TransactionConfig(transaction_state_log_num_partitions=1, transaction_max_timeout_ms=1000))
    assert h.init(timeout_ms=1001).error == E.invalid_transaction_timeout
    assert h.init(timeout_ms=0).error == E.invalid_transaction_timeout
    assert h.init(txn_id="x" * 40_000).error == E.invalid_request
    assert h.init(timeout_ms=1000).error == E.none


def test_a_second_producer_fences_the_first_and_aborts_its_transaction() -> None:
    h = Harness()
    a = h.init()
    h.call("add_partitions", transactional_id="t", producer_id=a.producer_id, producer_epoch=0, partitions=[TP0])
    # the new producer's init aborts the ongoing transaction with a bumped epoch, then retries
    assert h.init().error == E.concurrent_transactions
    assert h.state() is S.PREPARE_ABORT
    [marker] = h.markers
    assert not marker.commit and marker.producer_epoch == 1
    assert h.init().error == E.concurrent_transactions  # markers not written yet
    h.write_all_markers()
    assert h.state() is S.COMPLETE_ABORT
    b = h.init()
    assert (b.error, b.producer_epoch) == (E.none, 2)
    # the zombie is fenced everywhere
    assert h.call("end_txn", transactional_id="t", producer_id=a.producer_id, producer_epoch=0,
                  committed=True) == E.producer_fenced
    assert h.call("add_partitions", transactional_id="t", producer_id=a.producer_id, producer_epoch=0,
                  partitions=[TP1]) == E.producer_fenced


def test_timed_out_transaction_is_aborted_by_the_periodic_check() -> None:
    h = Harness()
    pid = h.init(timeout_ms=5000)
    h.call("add_partitions", transactional_id="t", producer_id=pid.producer_id, producer_epoch=0, partitions=[TP0])
    h.clock.advance(4000)
    h.run(h.core.poll(h.clock.monotonic_ms()))
    assert h.state() is S.ONGOING
    h.clock.advance(20_000)
    assert h.core.next_deadline_ms() is not None and h.core.next_deadline_ms() <= h.clock.monotonic_ms()
    h.run(h.core.poll(h.clock.monotonic_ms()))
    assert h.state() is S.PREPARE_ABORT
    h.write_all_markers()
    assert h.state() is S.COMPLETE_ABORT
    assert h.core.transactions["t"].producer_epoch == 1  # fenced
    assert h.call("end_txn", transactional_id="t", producer_id=pid.producer_id, producer_epoch=0,
                  committed=True) == E.producer_fenced


def test_expired_transactional_id_gets_a_tombstone() -> None:
    h = Harness(TransactionConfig(transaction_state_log_num_partitions=1, transactional_id_expiration_ms=60_000,
                                  transaction_remove_expired_transaction_cleanup_interval_ms=1000))
    h.init()
    h.clock.advance(61_000)
    h.run(h.core.poll(h.clock.monotonic_ms()))
    assert "t" not in h.core.transactions
    assert h.log[-1] == (records.key_bytes("t"), None)


def test_reload_resends_markers_of_a_prepared_transaction() -> None:
    h = Harness()
    pid = h.init()
    h.call("add_partitions", transactional_id="t", producer_id=pid.producer_id, producer_epoch=0, partitions=[TP0])
    h.call("end_txn", transactional_id="t", producer_id=pid.producer_id, producer_epoch=0, committed=True)
    h.markers.clear()
    h.run(h.core.unload(0))
    assert h.call("end_txn", transactional_id="t", producer_id=pid.producer_id, producer_epoch=0,
                  committed=True) == E.not_coordinator
    # another coordinator loads the log
    h.core.begin_load(0)
    assert h.call("end_txn", transactional_id="t", producer_id=pid.producer_id, producer_epoch=0,
                  committed=True) == E.coordinator_load_in_progress
    h.run(h.core.complete_load(0, list(h.log)))
    assert h.state() is S.PREPARE_COMMIT
    [marker] = h.markers
    assert marker.commit and marker.partitions == {TP0}
    h.write_all_markers()
    assert h.state() is S.COMPLETE_COMMIT


def test_failed_write_leaves_state_unchanged_and_answers_a_retriable_error() -> None:
    h = Harness()
    pid = h.init()
    h.fail_appends = E.not_leader_or_follower
    assert h.call("add_partitions", transactional_id="t", producer_id=pid.producer_id, producer_epoch=0,
                  partitions=[TP0]) == E.not_coordinator
    assert h.state() is S.EMPTY and h.core.transactions["t"].pending_state is None


def test_concurrent_request_while_a_write_is_in_flight() -> None:
    h = Harness()
    pid = h.init()
    out = h.core.add_partitions(100, transactional_id="t", producer_id=pid.producer_id, producer_epoch=0,
                                partitions=[TP0])
    assert h.core.end_txn(101, transactional_id="t", producer_id=pid.producer_id, producer_epoch=0,
                          committed=True).response_for(101) == E.concurrent_transactions
    h.run(out)
    assert h.responses[100] == E.none


def test_describe_and_list() -> None:
    h = Harness()
    pid = h.init()
    h.init(txn_id="other")
    h.call("add_partitions", transactional_id="t", producer_id=pid.producer_id, producer_epoch=0, partitions=[TP1])
    described = h.core.describe("t")
    assert (described.state, described.partitions, described.producer_id) == ("Ongoing", (TP1,), pid.producer_id)
    assert h.core.describe("nobody").error == E.transactional_id_not_found
    listed, unknown = h.core.list_transactions(["Ongoing", "Bogus"], [])
    assert [t.transactional_id for t in listed] == ["t"] and unknown == ("Bogus",)
    listed, _ = h.core.list_transactions([], [])
    assert {t.transactional_id for t in listed} == {"t", "other"}
    # KIP-1152: the pattern must match the whole id
    listed, _ = h.core.list_transactions([], [], -1, re.compile("oth"))
    assert listed == ()
    listed, _ = h.core.list_transactions([], [], -1, re.compile("oth.*|x"))
    assert [t.transactional_id for t in listed] == ["other"]


@pytest.mark.parametrize("epoch", [32766])
def test_exhausted_epoch_rotates_the_producer_id(epoch: int) -> None:
    h = Harness()
    h.init()
    h.core.transactions["t"].producer_epoch = epoch
    again = h.init()
    assert again.producer_epoch == 0 and again.producer_id != 1000


def test_kip360_expected_epoch_bumps_and_a_retry_gets_the_same_answer() -> None:
    h = Harness()
    first = h.init()
    bumped = h.init(producer_id=first.producer_id, producer_epoch=first.producer_epoch)
    assert (bumped.error, bumped.producer_epoch) == (E.none, 1)
    retried = h.init(producer_id=first.producer_id, producer_epoch=first.producer_epoch)
    assert (retried.error, retried.producer_epoch) == (E.none, 1)
    assert h.init(producer_id=first.producer_id, producer_epoch=7).error == E.producer_fenced


def test_verify_only_answers_whether_partitions_are_in_the_ongoing_transaction() -> None:
    h = Harness()
    pid = h.init()
    ids = {"transactional_id": "t", "producer_id": pid.producer_id, "producer_epoch": 0}
    assert h.core.verify_partitions(**ids, partitions=[TP0]) == {TP0: E.invalid_txn_state}  # nothing begun
    h.call("add_partitions", **ids, partitions=[TP0])
    assert h.core.verify_partitions(**ids, partitions=[TP0, TP1]) == {TP0: E.none, TP1: E.invalid_txn_state}
    h.call("end_txn", **ids, committed=False)
    assert h.core.verify_partitions(**ids, partitions=[TP0]) == {TP0: E.invalid_txn_state}  # a late batch
    assert h.core.verify_partitions(transactional_id="t", producer_id=pid.producer_id, producer_epoch=9,
                                    partitions=[TP0]) == {TP0: E.producer_fenced}
    log_before = list(h.log)
    h.core.verify_partitions(**ids, partitions=[TP0])
    assert h.log == log_before  # verification writes nothing
