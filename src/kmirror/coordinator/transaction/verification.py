"""KIP-890 part 1 on a partition leader, shared by every path that appends a producer's
transactional batch: Produce (`kmirror.broker.txn_verification`) and the group coordinator's
TxnOffsetCommit to `__consumer_offsets` (`ReplicaManagerCoordinatorLog`). Kafka has it in
`ReplicaManager.maybeStartTransactionVerificationForPartitions` and `AddPartitionsToTxnManager`.

For each partition the leader first takes a `VerificationGuard` from the producer state
(`ReplicaManager.maybe_start_transaction_verification`). `SENTINEL` means the producer's
transaction is already open there and nothing is asked. The other partitions are put to the
transactional id's coordinator: is each in the producer's ongoing transaction?
(`TransactionCoordinatorService.verify_partitions`, AddPartitionsToTxn `verify_only`.) The
append then carries the guard, so a marker written while the answer travels still refuses it.

The errors are Kafka's, before each API spells them for its clients (`produce_error` for
Produce, `txn_commits.txn_commit_error` for TxnOffsetCommit). One rule is shared, as
`AddPartitionsToTxnManager` applies it: PRODUCER_FENCED from the coordinator is
INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kmirror.log.producer_state import VerificationGuard
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.outcomes import PartitionError
from kmirror.types import TopicPartition


class TransactionVerifier(Protocol):
    """The transaction coordinator as a partition leader asks it (`TransactionCoordinatorService`):
    per partition, NONE when it is in the producer's ongoing transaction, else an error."""

    async def verify_partitions(self, *, transactional_id: str, producer_id: int, producer_epoch: int,
                                partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]: ...


class VerifyingLeader(Protocol):
    """The replica manager of the partitions' leader (`ReplicaManager`)."""

    def maybe_start_transaction_verification(self, tp: TopicPartition, producer_id: int, sequence: int,
                                             producer_epoch: int) -> VerificationGuard | PartitionError: ...


@dataclass(frozen=True, slots=True)
class TransactionVerification:
    """`guards`: what each verified partition's append carries (a partition whose transaction
    was open already is absent: it appends with `SENTINEL`). `leader_errors`: partitions this
    node cannot take the batch on (not leader, a stale epoch). `coordinator_errors`: partitions
    the coordinator did not confirm, with its answer."""

    guards: dict[TopicPartition, VerificationGuard] = field(default_factory=dict)
    leader_errors: dict[TopicPartition, PartitionError] = field(default_factory=dict)
    coordinator_errors: dict[TopicPartition, ErrorCode] = field(default_factory=dict)

    def error_for(self, tp: TopicPartition) -> ErrorCode | None:
        """The partition's error, either kind, or None when its append may go ahead."""
        leader_error = self.leader_errors.get(tp)
        return leader_error.code if leader_error is not None else self.coordinator_errors.get(tp)


def coordinator_answer(error: ErrorCode) -> ErrorCode:
    """Kafka `AddPartitionsToTxnManager`: the coordinator's PRODUCER_FENCED reaches the leader as
    INVALID_PRODUCER_EPOCH; every other answer as it is."""
    return ErrorCode.invalid_producer_epoch if error == ErrorCode.producer_fenced else error


async def verify_transaction(leader: VerifyingLeader, verifier: TransactionVerifier, *, transactional_id: str,
                             producer_id: int, producer_epoch: int,
                             sequences: Mapping[TopicPartition, int]) -> TransactionVerification:
    """Verify the producer's batches on `sequences`' partitions (partition -> the batch's base
    sequence; -1, Kafka's NO_SEQUENCE, for a coordinator's batch)."""
    result = TransactionVerification()
    for tp, sequence in sequences.items():
        guard = leader.maybe_start_transaction_verification(tp, producer_id, sequence, producer_epoch)
        if isinstance(guard, PartitionError):
            result.leader_errors[tp] = guard
        elif guard is not VerificationGuard.SENTINEL:
            result.guards[tp] = guard
    if not result.guards:
        return result
    answers = await verifier.verify_partitions(transactional_id=transactional_id, producer_id=producer_id,
                                               producer_epoch=producer_epoch, partitions=list(result.guards))
    for tp in result.guards:
        error = answers.get(tp, ErrorCode.coordinator_not_available)
        if error != ErrorCode.none:
            result.coordinator_errors[tp] = coordinator_answer(error)
    return result
