"""One transactional id's state as the coordinator holds it (Kafka `TransactionMetadata`).

A value: the coordinator core changes it only by `apply` of a `TxnTransitMetadata` whose
record has been persisted (Kafka `prepareTransitionTo` / `completeTransitionTo`), so what
is in memory is always what `__transaction_state` says, plus the in-flight `pending_state`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from kmirror.coordinator.transaction.records import TransactionLogValue
from kmirror.coordinator.transaction.state import TransactionState, transition
from kmirror.types import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# Kafka `TransactionMetadata.isEpochExhausted`: the last epochs are kept for the fence and
# the marker, so a producer at 32766 gets a new producer id instead of a bump.
MAX_PRODUCER_EPOCH = 32767


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_PRODUCER_EPOCH - 1


@dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The state a transition leads to: what is written to `__transaction_state`."""

    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    start_timestamp_ms: int
    last_update_timestamp_ms: int

    def log_value(self) -> TransactionLogValue:
        by_topic: dict[str, list[int]] = {}
        for tp in self.partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return TransactionLogValue(
            self.producer_id, self.producer_epoch, self.transaction_timeout_ms, self.state,
            tuple((t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items())),
            self.last_update_timestamp_ms, self.start_timestamp_ms, previous_producer_id=self.previous_producer_id)


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    previous_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: set[TopicPartition] = field(default_factory=set)
    start_timestamp_ms: int = -1
    last_update_timestamp_ms: int = -1
    # the state of a transition whose record is being written (Kafka `pendingState`)
    pending_state: TransactionState | None = None

    @classmethod
    def from_log(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        return cls(
            transactional_id, value.producer_id, value.previous_producer_id, value.producer_epoch,
            NO_PRODUCER_EPOCH, value.transaction_timeout_ms, value.state,
            {TopicPartition(t, p) for t, ps in value.partitions for p in ps},
            value.start_timestamp_ms, value.last_update_timestamp_ms)

    def transit(self, target: TransactionState, now_ms: int, **changes: object) -> TxnTransitMetadata:
        """The metadata after `state -> target` (checked against the table), with `changes`."""
        current = self.pending_state if self.pending_state is TransactionState.PREPARE_EPOCH_FENCE else self.state
        transition(current, target)
        base = TxnTransitMetadata(
            self.producer_id, self.previous_producer_id, self.producer_epoch, self.last_producer_epoch,
            self.transaction_timeout_ms, target, frozenset(self.partitions), self.start_timestamp_ms, now_ms)
        return replace(base, **changes)  # type: ignore[arg-type]

    def apply(self, transit: TxnTransitMetadata) -> None:
        self.producer_id = transit.producer_id
        self.previous_producer_id = transit.previous_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.transaction_timeout_ms = transit.transaction_timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.start_timestamp_ms = transit.start_timestamp_ms
        self.last_update_timestamp_ms = transit.last_update_timestamp_ms
        self.pending_state = None
