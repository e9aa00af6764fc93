"""KIP-890 part 1's verification guard through the broker: the real ReplicaManager, Partition
and Log (in-memory file system), the Produce handler and the WriteTxnMarkers path. A stub
transaction coordinator answers the verification, so the ABORT marker can land while its
answer is on the way, as it can when the coordinator is another broker."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Awaitable, Callable
from typing import Any
from uuid import uuid4

from kmirror.broker.handlers.produce import handle as produce_handler
from kmirror.broker.txn_markers import MarkerEntry, write_txn_markers
from kmirror.log.producer_state import VerificationGuard
from kmirror.metadata.image import PartitionRegistration
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.records.builder import build_batch
from kmirror.records.control import ControlType, build_control_batch
from kmirror.replication.outcomes import AppendOutcome, PartitionError
from kmirror.testing.replication import (
    call_handler,
    data_services,
    image_with,
    request_type,
    single_node_image,
)
from kmirror.types import TopicPartition

TP = TopicPartition("t", 0)
NOW = 1_700_000_000_000
PID, EPOCH = 4000, 0
TXN_ID = "txn-guard"


def services(coordinator: Any = None) -> Any:
    s = data_services(single_node_image(1, {"t": (uuid4(), 1)}))
    # `write_txn_markers` asks for the group coordinator only for `__consumer_offsets` markers
    return dataclasses.replace(s, transaction_coordinator=coordinator, group_coordinator=object())


def txn_batch(seq: int, epoch: int = EPOCH) -> bytes:
    return build_batch([(None, b"v%d" % seq, (), NOW)], producer_id=PID, producer_epoch=epoch,
                       base_sequence=seq, is_transactional=True)


def abort_marker() -> bytes:
    return build_control_batch(ControlType.ABORT, PID, EPOCH, NOW, coordinator_epoch=0)


def stable(s: Any) -> tuple[int, int]:
    log = s.replica_manager.get_partition(TP).log
    return log.last_stable_offset, log.high_watermark


class StubCoordinator:
    """Answers `verify_partitions` with `answer`, after running `meanwhile` (what reaches the
    partition leader while the answer travels)."""

    def __init__(self, answer: ErrorCode = ErrorCode.none) -> None:
        self.answer = answer
        self.meanwhile: Callable[[], Awaitable[None]] | None = None
        self.calls: list[list[TopicPartition]] = []

    async def verify_partitions(self, *, transactional_id: str, producer_id: int, producer_epoch: int,
                                partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        self.calls.append(list(partitions))
        if self.meanwhile is not None:
            await self.meanwhile()
        return dict.fromkeys(partitions, self.answer)


def produce(s: Any, records: bytes) -> int:
    P = request_type(0, 9)
    request = build(P, transactional_id=TXN_ID, acks=-1, timeout=datetime.timedelta(seconds=30),
                    topic_data=(nested(P, "TopicProduceData")(name=TP.topic, partition_data=(
                        nested(P, "PartitionProduceData")(index=TP.partition, records=records),)),))
    response = call_handler(produce_handler, s, 0, 9, request)
    return int(response.responses[0].partition_responses[0].error_code)


# ---- the replica manager's append path -------------------------------------------------------


def test_replica_manager_refuses_a_verified_batch_whose_abort_marker_landed_first() -> None:
    s = services()
    rm = s.replica_manager
    guard = rm.maybe_start_transaction_verification(TP, PID, 0, EPOCH)
    assert isinstance(guard, VerificationGuard) and guard is not VerificationGuard.SENTINEL
    assert isinstance(rm.append_coordinator_batches(TP, abort_marker()), AppendOutcome)  # WriteTxnMarkers
    late = rm.append_records({TP: txn_batch(0)}, -1, verification_guards={TP: guard})[TP]
    assert isinstance(late, PartitionError) and late.code == ErrorCode.invalid_txn_state
    assert stable(s) == (1, 1)  # only the marker; the LSO is not held


def test_replica_manager_appends_a_verified_batch_and_later_ones_need_no_guard() -> None:
    s = services()
    rm = s.replica_manager
    guard = rm.maybe_start_transaction_verification(TP, PID, 0, EPOCH)
    assert isinstance(guard, VerificationGuard)
    assert isinstance(rm.append_records({TP: txn_batch(0)}, -1, verification_guards={TP: guard})[TP], AppendOutcome)
    assert rm.maybe_start_transaction_verification(TP, PID, 1, EPOCH) is VerificationGuard.SENTINEL
    # a partition missing from the guards appends with SENTINEL: fine, its transaction is open
    assert isinstance(rm.append_records({TP: txn_batch(1)}, -1, verification_guards={})[TP], AppendOutcome)
    assert stable(s) == (0, 2)
    assert isinstance(rm.append_coordinator_batches(TP, abort_marker()), AppendOutcome)
    assert stable(s) == (3, 3)
    # the transaction is over: a batch of the next one needs a verification again
    refused = rm.append_records({TP: txn_batch(2)}, -1, verification_guards={})[TP]
    assert isinstance(refused, PartitionError) and refused.code == ErrorCode.invalid_txn_state


def test_replica_manager_reuses_the_guard_of_a_verification_in_progress() -> None:
    rm = services().replica_manager
    first = rm.maybe_start_transaction_verification(TP, PID, 0, EPOCH)
    assert rm.maybe_start_transaction_verification(TP, PID, 0, EPOCH) is first
    assert isinstance(rm.append_coordinator_batches(TP, abort_marker()), AppendOutcome)
    after = rm.maybe_start_transaction_verification(TP, PID, 0, EPOCH)
    assert isinstance(after, VerificationGuard) and after != first


def test_replica_manager_answers_not_leader_and_unknown_partition_before_verifying() -> None:
    rm = services().replica_manager
    unknown = rm.maybe_start_transaction_verification(TopicPartition("nope", 0), PID, 0, EPOCH)
    assert isinstance(unknown, PartitionError) and unknown.code == ErrorCode.unknown_topic_or_partition
    topic_id = rm.get_partition(TP).topic_id
    rm.apply_image(None, image_with({"t": (topic_id, {0: PartitionRegistration((1, 2), (1, 2), 2, 1, 1)})}))
    not_leader = rm.maybe_start_transaction_verification(TP, PID, 0, EPOCH)
    assert isinstance(not_leader, PartitionError) and not_leader.code == ErrorCode.not_leader_or_follower


# ---- Produce: the coordinator's answer arrives after the marker ------------------------------


def test_produce_refuses_a_batch_whose_transaction_was_aborted_while_it_was_being_verified() -> None:
    coordinator = StubCoordinator(ErrorCode.none)  # the coordinator said yes, then aborted
    s = services(coordinator)

    async def abort_marker_arrives() -> None:
        answers = await write_txn_markers(s, [MarkerEntry(PID, EPOCH, False, 0, (TP,))])
        assert answers == [{TP: ErrorCode.none}]

    coordinator.meanwhile = abort_marker_arrives
    assert produce(s, txn_batch(0)) == ErrorCode.invalid_txn_state
    assert coordinator.calls == [[TP]]
    assert stable(s) == (1, 1)  # the ABORT marker alone; nothing holds the LSO


def test_produce_appends_a_verified_batch_and_verifies_only_the_first_of_a_transaction() -> None:
    coordinator = StubCoordinator(ErrorCode.none)
    s = services(coordinator)
    assert produce(s, txn_batch(0)) == ErrorCode.none
    assert produce(s, txn_batch(1)) == ErrorCode.none
    assert coordinator.calls == [[TP]]  # the second batch's transaction was open here
    assert stable(s) == (0, 2)


def test_produce_refusal_by_the_coordinator_leaves_a_guard_the_retry_reuses() -> None:
    coordinator = StubCoordinator(ErrorCode.not_coordinator)
    s = services(coordinator)
    assert produce(s, txn_batch(0)) == ErrorCode.not_enough_replicas  # retriable for the producer
    log = s.replica_manager.get_partition(TP).log
    guard = log.producer_state.verification_guard(PID)
    assert guard is not VerificationGuard.SENTINEL
    coordinator.answer = ErrorCode.none
    assert produce(s, txn_batch(0)) == ErrorCode.none
    assert log.producer_state.verification_state_entry(PID) is None
    assert coordinator.calls == [[TP], [TP]]


def test_produce_spells_the_coordinators_answers_as_kafka_does() -> None:
    """The answers of the verification shared with TxnOffsetCommit, as Produce gives them."""
    spelled = {}
    for answer in (ErrorCode.network_exception, ErrorCode.concurrent_transactions, ErrorCode.producer_fenced,
                   ErrorCode.invalid_producer_id_mapping, ErrorCode.invalid_txn_state):
        spelled[answer] = produce(services(StubCoordinator(answer)), txn_batch(0))
    assert spelled == {ErrorCode.network_exception: ErrorCode.not_enough_replicas,  # unreachable: retried
                       ErrorCode.concurrent_transactions: ErrorCode.not_enough_replicas,
                       ErrorCode.producer_fenced: ErrorCode.invalid_producer_epoch,
                       ErrorCode.invalid_producer_id_mapping: ErrorCode.invalid_txn_state,
                       ErrorCode.invalid_txn_state: ErrorCode.invalid_txn_state}
