"""What the transaction coordinator core answers, as values (Kafka `TxnMarkerEntry`,
`InitProducerIdResult`, the DescribeTransactions / ListTransactions entries), and the error
a failed write of a transaction record answers the client."""

from __future__ import annotations

from dataclasses import dataclass, field

from kmirror.coordinator.results import Append, Output
from kmirror.coordinator.transaction.metadata import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from kmirror.protocol.errors import ErrorCode
from kmirror.types import TopicPartition

E = ErrorCode


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """COMMIT or ABORT markers owed to the leaders of `partitions` (Kafka `TxnMarkerEntry`)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: frozenset[TopicPartition]


@dataclass
class TxnOutput(Output[Append]):
    markers: list[TxnMarker] = field(default_factory=list)

    def extend(self, other: Output) -> TxnOutput:
        super().extend(other)
        if isinstance(other, TxnOutput):
            self.markers.extend(other.markers)
        return self


@dataclass(frozen=True, slots=True)
class InitProducerIdResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class DescribedTransaction:
    transactional_id: str
    error: ErrorCode
    state: str = ""
    transaction_timeout_ms: int = 0
    start_timestamp_ms: int = -1
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    transactional_id: str
    producer_id: int
    state: str


def append_error(error: ErrorCode) -> ErrorCode:
    """Kafka `TransactionStateManager.appendTransactionToLog`: what a failed write of a
    transaction record answers the client."""
    if error in (E.unknown_topic_or_partition, E.not_enough_replicas, E.not_enough_replicas_after_append,
                 E.request_timed_out):
        return E.coordinator_not_available
    if error in (E.not_leader_or_follower, E.kafka_storage_error, E.not_coordinator):
        return E.not_coordinator
    if error in (E.message_too_large, E.record_list_too_large):
        return E.unknown_server_error
    return error
