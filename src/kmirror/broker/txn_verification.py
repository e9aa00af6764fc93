"""KIP-890 part 1, the partition leader's server-side defence against hanging transactions
(Kafka `ReplicaManager.appendRecords` with transaction verification).

Before a leader appends the first transactional batch of a producer that has no ongoing
transaction on the partition, it asks the transaction coordinator whether the partition is in
that producer's ongoing transaction (AddPartitionsToTxn `verify_only`). A batch that is not
(a late retry of an aborted or committed transaction, or a zombie's) is refused, so it can
never open a transaction that no marker will close and stall the LSO. Batches of a producer
whose transaction is already open on the partition need no check.

The answer can be stale by the time it arrives: the coordinator may abort the transaction and
its ABORT marker reach this partition while the answer travels. So before asking, the leader
takes a `VerificationGuard` from the partition's producer state
(`ReplicaManager.maybe_start_transaction_verification`, Kafka
`maybeStartTransactionVerificationForPartition`), and the append carries it: the marker ends
the producer's verification entry, and a batch whose guard is no longer the producer's is
refused with INVALID_TXN_STATE (`kmirror.log.producer_state`).

A transactional batch in a Produce request without a transactional id is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka does. Answers to the producer: the coordinator's
retriable errors (not coordinator, not available,
loading, concurrent transactions, unreachable) become NOT_ENOUGH_REPLICAS, which every producer
retries, as Kafka does; PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH; anything else
INVALID_TXN_STATE. The verification itself is shared with the group coordinator's
TxnOffsetCommit (`kmirror.coordinator.transaction.verification`).
"""

from __future__ import annotations

from typing import Any

from kmirror.broker.services import BrokerServices
from kmirror.coordinator.transaction.verification import verify_transaction
from kmirror.log.producer_state import VerificationGuard
from kmirror.protocol.errors import ErrorCode
from kmirror.records.batch import BatchHeader, CorruptRecordError, read_header
from kmirror.replication.outcomes import PartitionError
from kmirror.types import TopicPartition

_RETRIABLE = frozenset({ErrorCode.not_coordinator, ErrorCode.coordinator_not_available,
                        ErrorCode.coordinator_load_in_progress, ErrorCode.concurrent_transactions,
                        ErrorCode.network_exception})


def _transactional_header(records: Any) -> BatchHeader | None:
    """The header of a transactional data batch with a producer id, else None."""
    try:
        header = read_header(records, 0)
    except CorruptRecordError:
        return None  # validation refuses it
    if not header.is_transactional or not header.has_producer_id or header.is_control:
        return None
    return header


def produce_error(error: ErrorCode) -> ErrorCode:
    """The coordinator's answer (`verify_transaction`) as Produce answers it."""
    if error in _RETRIABLE:
        return ErrorCode.not_enough_replicas
    if error == ErrorCode.invalid_producer_epoch:
        return error
    return ErrorCode.invalid_txn_state


async def verify_transactional_batches(services: BrokerServices, transactional_id: str | None,
                                       entries: dict[TopicPartition, Any],
                                       errors: dict[TopicPartition, PartitionError]
                                       ) -> dict[TopicPartition, VerificationGuard] | None:
    """Moves every entry whose transactional batch fails verification to `errors`; returns the
    guards the appends must carry (`ReplicaManager.append_records`), or None when this node
    verifies nothing (no transaction coordinator)."""
    coordinator = services.transaction_coordinator
    if coordinator is None:
        return None
    guards: dict[TopicPartition, VerificationGuard] = {}
    by_producer: dict[tuple[int, int], dict[TopicPartition, int]] = {}  # -> {tp: base sequence}
    for tp, records in entries.items():
        header = _transactional_header(records)
        if header is not None:
            by_producer.setdefault((header.producer_id, header.producer_epoch), {})[tp] = header.base_sequence
    for (producer_id, producer_epoch), sequences in by_producer.items():
        if not transactional_id:
            # Kafka `handleProduceRequest`: transactional records need a transactional id
            for tp in sequences:
                entries.pop(tp, None)
                errors[tp] = PartitionError(ErrorCode.transactional_id_authorization_failed,
                                            "transactional records without a transactional id")
            continue
        verification = await verify_transaction(services.replica_manager, coordinator,
                                                transactional_id=transactional_id, producer_id=producer_id,
                                                producer_epoch=producer_epoch, sequences=sequences)
        guards.update(verification.guards)
        for tp, leader_error in verification.leader_errors.items():
            entries.pop(tp, None)
            errors[tp] = leader_error
        for tp, error in verification.coordinator_errors.items():
            entries.pop(tp, None)
            errors[tp] = PartitionError(produce_error(error),
                                        f"transactional batch of producer {producer_id} not verified: "
                                        f"{error.name} from the transaction coordinator")
    return guards
