"""Idempotent producer state per partition (Kafka `ProducerStateManager`/`ProducerAppendInfo`).

For each producer id: its epoch, the metadata of its last 5 batches (Kafka's
`NUM_BATCHES_TO_RETAIN`, the max in-flight requests an idempotent producer may use) and the
first offset of its ongoing transaction. The state is a value rebuilt from batch headers;
`kmirror.log.producer_snapshot` persists it.

Client-origin rules (Kafka `ProducerAppendInfo.checkProducerEpoch`/`checkSequence`):
- an epoch below the current one -> INVALID_PRODUCER_EPOCH (47);
- a new epoch must start at sequence 0 unless the producer had no epoch -> OUT_OF_ORDER (45);
- same epoch: the first sequence must follow the last one (int32 wraps to 0), except that a
  producer with no known epoch (new, or its records deleted by retention) may start anywhere
  (KIP-360: UNKNOWN_PRODUCER_ID is no longer returned for that case);
- a batch equal (epoch, first and last sequence) to one of the last 5 is a duplicate: it is
  acknowledged with its original offsets and not appended again.
Replication-origin appends (followers, mirroring) skip the checks and only update state.

KIP-890 part 1, the verification guard (Kafka `VerificationGuard`, `VerificationStateEntry`):
before the leader asks the transaction coordinator whether a producer's first transactional
batch belongs to its ongoing transaction, `maybe_create_verification_state_entry` gives the
producer an entry holding a fresh guard (or the entry it already has). The append carries that
guard; a transactional batch that would start a transaction is accepted only when the
producer's entry still holds the same guard (`check_client_batch`), else INVALID_TXN_STATE.
Any transactional batch of the producer (the first of its transaction, or a COMMIT/ABORT
marker) removes the entry (`update`), and so does its expiry: a batch verified before the
marker of its transaction can no longer open a transaction after it. The entry also keeps the
lowest sequence seen while verifying, and a client batch of a higher sequence is
OUT_OF_ORDER_SEQUENCE_NUMBER until it is gone (Kafka `ProducerAppendInfo.checkSequence`), so
a retried lower batch is never overtaken. Verification state lives in memory only: it is not
part of the state rebuilt from the log, nor of equality.

Expiry (KIP-854, `producer.id.expiration.ms`): a producer with no open transaction whose last
batch's timestamp is that old is forgotten (`remove_expired_producers`, run periodically by the
node and after a truncation rebuilds the state), so a partition that saw many short-lived
producers does not keep them all, and a compacted log can clean their last batches.

KIP-1279 MIRROR_PID_RESET: a control batch of type 7 (written by the destination leader when
a mirror topic fails over) expires every producer entry, on append and when the state is
rebuilt from the log, so producers of the source cluster are forgotten: their old sequences
are never checked against producers of the destination, which get fresh PIDs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import ClassVar

from kmirror.kip1279.failover import expires_producer_state
from kmirror.log.outcomes import AppendError
from kmirror.log.transaction_index import CompletedTxn
from kmirror.protocol.errors import ErrorCode
from kmirror.records.batch import BatchHeader, Buffer, CorruptRecordError
from kmirror.records.control import ControlType, parse_end_txn_marker, read_control_type
from kmirror.records.record import InvalidRecordError, decode_records

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
_INT32_MAX = 2**31 - 1
# Kafka's `producer.id.expiration.ms` default (KIP-854): a producer with no open transaction and
# no batch for this long, and a verification entry this old, are forgotten
# (`ProducerStateManager.removeExpiredProducers`).
PRODUCER_ID_EXPIRATION_MS = 86_400_000


class VerificationGuard:
    """Kafka `VerificationGuard`: a unique token for one verification of a producer's
    transaction on a partition. `SENTINEL` (no verification was done) verifies nothing."""

    __slots__ = ("_value",)
    SENTINEL: ClassVar[VerificationGuard]
    _values: ClassVar[itertools.count[int]] = itertools.count(1)

    def __init__(self) -> None:
        self._value = next(VerificationGuard._values)

    def verifies(self, verifying_guard: VerificationGuard) -> bool:
        """True when `verifying_guard` (the one an append carries) is this guard."""
        return verifying_guard is not VerificationGuard.SENTINEL and verifying_guard == self

    def __eq__(self, other: object) -> bool:
        return isinstance(other, VerificationGuard) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return f"VerificationGuard(value={self._value})"


VerificationGuard.SENTINEL = object.__new__(VerificationGuard)
VerificationGuard.SENTINEL._value = 0


@dataclass(slots=True)
class VerificationStateEntry:
    """Kafka `VerificationStateEntry`: the guard of a producer's verification in progress on
    this partition, when it began, and the lowest sequence and highest epoch seen by it."""

    timestamp: int
    lowest_sequence: int
    epoch: int
    verification_guard: VerificationGuard = field(default_factory=VerificationGuard)

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        """A lower sequence of the same epoch lowers the bar; a higher epoch replaces epoch and
        sequence (its sequences start again). The guard stays the same."""
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: list[BatchMetadata] = field(default_factory=list)
    current_txn_first_offset: int | None = None
    last_timestamp: int = -1
    last_offset: int = -1  # of the producer's last batch of any kind (markers included)
    # of the last end-transaction marker (Kafka `ProducerStateEntry.coordinatorEpoch`)
    coordinator_epoch: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == header.base_sequence and batch.last_seq == header.last_sequence:
                return batch
        return None


def control_type_for_state(buf: Buffer, pos: int, header: BatchHeader) -> ControlType | None:
    """The control type of the batch at `pos` (None for data batches), read from the control
    record key: end-transaction markers need it (an ABORT is indexed, a COMMIT is not) and so
    does MIRROR_PID_RESET. A control record that cannot be parsed is treated as UNKNOWN
    (Kafka ignores unknown control types)."""
    if not header.is_control:
        return None
    try:
        return read_control_type(buf, pos)
    except (CorruptRecordError, InvalidRecordError):
        return ControlType.UNKNOWN


def marker_coordinator_epoch(buf: Buffer, pos: int, header: BatchHeader) -> int | None:
    """The coordinator epoch of an end-transaction marker at `pos` (None for other batches,
    or a marker value that cannot be read)."""
    if not (header.is_control and header.is_transactional):
        return None
    try:
        records = decode_records(buf, pos)
        return parse_end_txn_marker(records[0].value) if records else None
    except (CorruptRecordError, InvalidRecordError):
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


class ProducerState:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}
        # Verifications in progress per producer id (in memory only, see the module doc)
        self.verification_states: dict[int, VerificationStateEntry] = {}
        # Offset of the last MIRROR_PID_RESET applied (-1: none since this state was built);
        # truncating at or below it must rebuild the state from the log.
        self.last_reset_offset = -1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProducerState) and self.producers == other.producers

    # -- KIP-890 part 1 verification ------------------------------------------------------

    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Kafka `UnifiedLog.hasOngoingTransaction`: a transaction of this epoch is open here."""
        entry = self.producers.get(producer_id)
        return (entry is not None and entry.current_txn_first_offset is not None
                and entry.producer_epoch == producer_epoch)

    def maybe_create_verification_state_entry(self, producer_id: int, sequence: int, epoch: int,
                                              now_ms: int) -> VerificationStateEntry:
        """Kafka `ProducerStateManager.maybeCreateVerificationStateEntry`: the producer's entry
        (created with a fresh guard if it has none), its lowest sequence and epoch updated."""
        entry = self.verification_states.get(producer_id)
        if entry is None:
            entry = self.verification_states[producer_id] = VerificationStateEntry(now_ms, sequence, epoch)
        entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
        return entry

    def verification_state_entry(self, producer_id: int) -> VerificationStateEntry | None:
        return self.verification_states.get(producer_id)

    def verification_guard(self, producer_id: int) -> VerificationGuard:
        """The guard of the producer's verification in progress, else `SENTINEL`."""
        entry = self.verification_states.get(producer_id)
        return VerificationGuard.SENTINEL if entry is None else entry.verification_guard

    def clear_verification_state_entry(self, producer_id: int) -> None:
        self.verification_states.pop(producer_id, None)

    def remove_expired_producers(self, now_ms: int, expiration_ms: int = PRODUCER_ID_EXPIRATION_MS) -> int:
        """Kafka `ProducerStateManager.removeExpiredProducers`: forget every producer without an
        open transaction whose last batch's timestamp is `expiration_ms` or more before
        `now_ms`, and every verification entry that began that long ago (one that never led to
        an append). Returns how many producers went. A forgotten producer's next batch is
        checked as a new producer's (any sequence), and the cleaner no longer keeps its last
        batch."""
        expired = [pid for pid, e in self.producers.items()
                   if e.current_txn_first_offset is None and now_ms - e.last_timestamp >= expiration_ms]
        for pid in expired:
            del self.producers[pid]
        for pid in [pid for pid, e in self.verification_states.items() if now_ms - e.timestamp >= expiration_ms]:
            del self.verification_states[pid]
        return len(expired)

    def check_verification(self, header: BatchHeader,
                           verification_guard: VerificationGuard) -> AppendError | None:
        """Kafka `UnifiedLog.analyzeAndValidateProducerState`: a transactional data batch that
        would start a transaction (none of its epoch is open here) must carry the guard of the
        producer's verification; a stale epoch is INVALID_PRODUCER_EPOCH first."""
        if not header.is_transactional or header.is_control or not header.has_producer_id:
            return None
        if self.has_ongoing_transaction(header.producer_id, header.producer_epoch):
            return None
        entry = self.producers.get(header.producer_id)
        if entry is not None and header.producer_epoch < entry.producer_epoch:
            return AppendError(
                ErrorCode.invalid_producer_epoch,
                f"Epoch of producer {header.producer_id} is {header.producer_epoch}, "
                f"which is smaller than the last seen epoch {entry.producer_epoch}")
        if not self.verification_guard(header.producer_id).verifies(verification_guard):
            return AppendError(ErrorCode.invalid_txn_state,
                               f"Record of producer {header.producer_id} was not part of an ongoing transaction")
        return None

    def _check_lowest_sequence(self, header: BatchHeader) -> AppendError | None:
        verification = self.verification_states.get(header.producer_id)
        if verification is not None and header.base_sequence > verification.lowest_sequence:
            return AppendError(
                ErrorCode.out_of_order_sequence_number,
                f"Out of order sequence number for producer {header.producer_id}: {header.base_sequence} "
                f"(incoming seq. number), {verification.lowest_sequence} (earliest seen sequence)")
        return None

    # -- leader appends ---------------------------------------------------------------------

    def check_client_batch(self, header: BatchHeader, coordinator_epoch: int | None = None,
                           verification_guard: VerificationGuard | None = None
                           ) -> BatchMetadata | AppendError | None:
        """Validate a leader append of `header` (offsets not yet assigned): the duplicate's
        metadata, an error, or None when it may be appended. An end-transaction marker
        (`coordinator_epoch` from its value) from a coordinator older than the one that wrote
        the producer's last marker is TRANSACTION_COORDINATOR_FENCED (Kafka
        `ProducerAppendInfo.appendEndTxnMarker`). With a `verification_guard` (the append
        path verifies transactions; `SENTINEL` when it verified nothing for this batch) a
        batch that would start a transaction needs the producer's current guard
        (`check_verification`)."""
        if not header.has_producer_id:
            return None
        entry = self.producers.get(header.producer_id)
        duplicate = None if entry is None else entry.find_duplicate(header)
        if duplicate is not None:
            return duplicate
        if verification_guard is not None:
            refused = self.check_verification(header, verification_guard)
            if refused is not None:
                return refused
        if entry is None:
            if header.is_control or header.base_sequence < 0:
                return None
            return self._check_lowest_sequence(header)
        if header.producer_epoch < entry.producer_epoch:
            return AppendError(
                ErrorCode.invalid_producer_epoch,
                f"Epoch of producer {header.producer_id} is {header.producer_epoch}, "
                f"which is smaller than the last seen epoch {entry.producer_epoch}")
        if coordinator_epoch is not None and coordinator_epoch < entry.coordinator_epoch:
            return AppendError(
                ErrorCode.transaction_coordinator_fenced,
                f"Invalid coordinator epoch for producer {header.producer_id}: {coordinator_epoch} "
                f"(zombie), {entry.coordinator_epoch} (current)")
        if header.is_control or header.base_sequence < 0:
            # markers, and coordinator writes without a sequence (Kafka's NO_SEQUENCE, e.g.
            # transactional offset commits): epoch-checked only; client batches always carry one
            return None
        lowest = self._check_lowest_sequence(header)
        if lowest is not None:
            return lowest
        if header.producer_epoch != entry.producer_epoch:
            if header.base_sequence != 0 and entry.producer_epoch != NO_PRODUCER_EPOCH:
                return AppendError(
                    ErrorCode.out_of_order_sequence_number,
                    f"Invalid sequence number for new epoch of producer {header.producer_id}: "
                    f"{header.producer_epoch} (request epoch), {header.base_sequence} (seq. number), "
                    f"{entry.producer_epoch} (current producer epoch)")
        elif entry.batches and not _in_sequence(entry.last_seq, header.base_sequence):
            return AppendError(
                ErrorCode.out_of_order_sequence_number,
                f"Out of order sequence number for producer {header.producer_id}: "
                f"{header.base_sequence} (incoming seq. number), {entry.last_seq} (current end sequence number)")
        return None

    def update(self, header: BatchHeader, control_type: ControlType | None = None,
               coordinator_epoch: int | None = None) -> CompletedTxn | None:
        """Record an appended batch (offsets assigned). A transactional control batch (an
        end-transaction marker) ends the producer's transaction: the completed transaction
        is returned, aborted unless `control_type` is COMMIT (Kafka
        `ProducerAppendInfo.appendEndTxnMarker`: a marker without an ongoing transaction
        completes one starting at the marker). A MIRROR_PID_RESET (`control_type`, see
        `control_type_for_state`) expires every producer. Any transactional batch ends the
        producer's verification (Kafka `UnifiedLog.updateProducers`): its transaction now has a
        first offset here, or has ended."""
        if expires_producer_state(header, control_type):
            self.expire_all(header.last_offset)
            return None
        if not header.has_producer_id:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerStateEntry(header.producer_id)
        if header.producer_epoch != entry.producer_epoch:
            entry.producer_epoch = header.producer_epoch
            entry.batches.clear()
        entry.last_timestamp = header.max_timestamp
        entry.last_offset = header.last_offset
        if header.is_transactional:
            self.verification_states.pop(header.producer_id, None)
        if header.is_control:
            if not header.is_transactional:
                return None
            first_offset = entry.current_txn_first_offset
            entry.current_txn_first_offset = None
            if coordinator_epoch is not None:
                entry.coordinator_epoch = coordinator_epoch
            return CompletedTxn(header.producer_id, header.base_offset if first_offset is None else first_offset,
                                header.last_offset, control_type is not ControlType.COMMIT)
        if header.base_sequence >= 0:
            entry.batches.append(BatchMetadata(header.base_sequence, header.last_sequence,
                                               header.base_offset, header.last_offset, header.max_timestamp))
            del entry.batches[:-NUM_BATCHES_TO_RETAIN]
        if header.is_transactional and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = header.base_offset
        return None

    def last_stable_offset_after(self, completed: CompletedTxn) -> int:
        """Kafka `ProducerStateManager.lastStableOffset(completedTxn)`: the first offset of
        the oldest transaction still ongoing from another producer, else the offset after
        the marker. Stored with an aborted transaction in the transaction index."""
        offsets = [e.current_txn_first_offset for pid, e in self.producers.items()
                   if pid != completed.producer_id and e.current_txn_first_offset is not None]
        return min(offsets) if offsets else completed.last_offset + 1

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest ongoing transaction (bounds the LSO, Kafka
        `ProducerStateManager.firstUnstableOffset`); None when no transaction is open. Asked
        for every partition of every consumer Fetch."""
        first: int | None = None
        for entry in self.producers.values():
            offset = entry.current_txn_first_offset
            if offset is not None and (first is None or offset < first):
                first = offset
        return first

    def expire_all(self, reset_offset: int) -> None:
        """Forget every producer (MIRROR_PID_RESET at `reset_offset`), ongoing transactions
        included: a mirror partition is truncated to its LSO before the reset is written."""
        self.producers.clear()
        self.last_reset_offset = reset_offset

    def affected_by_truncation(self, offset: int) -> bool:
        """True when a batch at or after `offset` shaped this state (a rebuild is needed)."""
        return self.last_reset_offset >= offset or any(e.last_offset >= offset for e in self.producers.values())

    def truncate_and_forget(self) -> None:
        self.producers.clear()
        self.last_reset_offset = -1

    def remove_before(self, log_start_offset: int) -> None:
        """Forget producers whose last batch is below the log start (Kafka
        `removeStraySnapshots`/`truncateHead`): their sequences are no longer checkable."""
        for pid in [pid for pid, e in self.producers.items()
                    if e.batches and e.batches[-1].last_offset < log_start_offset
                    and e.current_txn_first_offset is None]:
            del self.producers[pid]
