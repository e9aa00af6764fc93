"""The sans-IO transaction coordinator (Kafka `TransactionCoordinator` with the state kept
as `TransactionStateManager` keeps it), for clients of transaction version 1 (KIP-98).

Events in: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, DescribeTransactions,
ListTransactions, partition load/unload, append completions, marker completions and
`poll(now)` for the periodic checks. Values out: `TxnOutput`, executed by the shell in order:
1. append each `Append` to its `__transaction_state` partition and report it with
   `on_append_completed` (a state changes in memory only once its record is persisted);
2. send each `TxnMarker` (WriteTxnMarkers to the leaders of its partitions, retried until
   written or no longer wanted: `marker_wanted`) and report each written partition with
   `on_marker_written`; once every partition has its marker the transaction's
   CompleteCommit / CompleteAbort is appended;
3. deliver the responses.

A transactional id lives in partition `partition_for(id)` of `__transaction_state`; this
node coordinates it while it leads that partition and has loaded it. The coordinator epoch
written into markers is that partition's leader epoch.

Producer ids come from the `next_producer_id` port (blocks from the controller), called at
most once per event; the shell makes sure one is available before each InitProducerId.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kmirror.coordinator.offsets.partitioner import partition_for
from kmirror.coordinator.partition_status import PartitionStatus, partition_coordinator_error
from kmirror.coordinator.results import Append
from kmirror.coordinator.transaction import records
from kmirror.coordinator.transaction.config import MAX_TRANSACTIONAL_ID_BYTES, TransactionConfig
from kmirror.coordinator.transaction.metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from kmirror.coordinator.transaction.results import (
    DescribedTransaction,
    InitProducerIdResult,
    ListedTransaction,
    TxnMarker,
    TxnOutput,
    append_error,
)
from kmirror.coordinator.transaction.state import TransactionState, transition
from kmirror.ports import Clock
from kmirror.protocol.client_regex import ClientRegex
from kmirror.protocol.errors import ErrorCode
from kmirror.types import TopicPartition

E = ErrorCode
S = TransactionState


@dataclass(frozen=True, slots=True)
class _Waiting:
    transactional_id: str
    partition: int
    coordinator_epoch: int
    transit: TxnTransitMetadata
    on_success: Callable[[], TxnOutput]
    on_failure: Callable[[ErrorCode], TxnOutput]


@dataclass
class CoreState:
    transactions: dict[str, TransactionMetadata] = field(default_factory=dict)
    partitions: dict[int, PartitionStatus] = field(default_factory=dict)
    coordinator_epochs: dict[int, int] = field(default_factory=dict)


class TransactionCoordinator:
    def __init__(self, config: TransactionConfig, clock: Clock, next_producer_id: Callable[[], int],
                 coordinator_epoch_of: Callable[[int], int]) -> None:
        self.config = config
        self.clock = clock
        self._next_producer_id = next_producer_id
        self._coordinator_epoch_of = coordinator_epoch_of
        self.state = CoreState()
        self._waiting: dict[int, _Waiting] = {}
        self._next_ticket = 0
        # transactional id -> partitions whose marker is not written yet
        self._markers_pending: dict[str, set[TopicPartition]] = {}
        # transactional ids whose markers are all written but whose Complete* is not persisted
        self._markers_done: set[str] = set()
        self._next_abort_check_ms: int | None = None
        self._next_expire_check_ms: int | None = None

    # ---- ownership -------------------------------------------------------------------

    @property
    def transactions(self) -> dict[str, TransactionMetadata]:
        return self.state.transactions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    def coordinator_error(self, transactional_id: str) -> ErrorCode | None:
        return partition_coordinator_error(self.state.partitions, self.partition_for(transactional_id))

    def begin_load(self, partition: int) -> None:
        self.state.partitions[partition] = PartitionStatus.LOADING
        self.state.coordinator_epochs[partition] = self._coordinator_epoch_of(partition)

    def complete_load(self, partition: int, log_records: Iterable[tuple[bytes, bytes | None]]) -> TxnOutput:
        """Replay the partition (last record per transactional id wins, a tombstone removes
        it), then finish what a previous coordinator left half done: markers of prepared
        transactions are sent again (Kafka `TransactionStateManager.loadTransactionsForTxnTopicPartition`
        and `TransactionCoordinator.onElection`). Ongoing ones abort when they time out."""
        loaded: dict[str, TransactionMetadata] = {}
        for key, value in log_records:
            try:
                txn_id = records.parse_key(key)
                if value is None:
                    loaded.pop(txn_id, None)
                else:
                    loaded[txn_id] = TransactionMetadata.from_log(txn_id, records.parse_value(value))
            except records.TransactionLogFormatError:
                continue  # Kafka skips records it cannot read (other record types, newer versions)
        self.state.transactions.update(loaded)
        self.state.partitions[partition] = PartitionStatus.LOADED
        out = TxnOutput()
        for meta in loaded.values():
            if meta.state.is_prepare:
                out.extend(self._send_markers(meta))
        now = self.clock.monotonic_ms()
        if self._next_abort_check_ms is None:
            self._next_abort_check_ms = now + self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
        if self._next_expire_check_ms is None:
            self._next_expire_check_ms = now + self.config.transaction_remove_expired_transaction_cleanup_interval_ms
        return out

    def unload(self, partition: int) -> TxnOutput:
        """This node no longer leads the partition: its transactional ids are forgotten here
        (their in-flight writes answer NOT_COORDINATOR, their markers stop being wanted)."""
        self.state.partitions.pop(partition, None)
        self.state.coordinator_epochs.pop(partition, None)
        for txn_id in [t for t in self.state.transactions if self.partition_for(t) == partition]:
            del self.state.transactions[txn_id]
            self._markers_pending.pop(txn_id, None)
            self._markers_done.discard(txn_id)
        if not self.state.partitions:
            self._next_abort_check_ms = self._next_expire_check_ms = None
        return TxnOutput()

    # ---- InitProducerId --------------------------------------------------------------

    def init_producer_id(self, request_id: int, *, transactional_id: str, transaction_timeout_ms: int,
                         producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH) -> TxnOutput:
        """InitProducerId with a transactional id (Kafka `handleInitProducerId`): a new id gets
        a producer id; a known one gets its epoch bumped, which fences older producers of the
        id; an ongoing transaction is aborted first (answered CONCURRENT_TRANSACTIONS, the
        client retries). `producer_id`/`producer_epoch` are KIP-360's expected values."""

        def reply(error: ErrorCode, pid: int = NO_PRODUCER_ID, epoch: int = NO_PRODUCER_EPOCH) -> TxnOutput:
            return TxnOutput(responses=[(request_id, InitProducerIdResult(error, pid, epoch))])

        if not transactional_id or len(transactional_id.encode()) > MAX_TRANSACTIONAL_ID_BYTES:
            return reply(E.invalid_request)
        err = self.coordinator_error(transactional_id)
        if err is not None:
            return reply(err)
        if not 0 < transaction_timeout_ms <= self.config.transaction_max_timeout_ms:
            return reply(E.invalid_transaction_timeout)
        now = self.clock.now_ms()
        meta = self.state.transactions.get(transactional_id)
        if meta is None:
            meta = TransactionMetadata(transactional_id, self._next_producer_id(), NO_PRODUCER_ID,
                                       NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH, transaction_timeout_ms, S.EMPTY,
                                       last_update_timestamp_ms=now)
            self.state.transactions[transactional_id] = meta
        if meta.pending_state is not None:
            return reply(E.concurrent_transactions)
        if producer_id != NO_PRODUCER_ID:
            if producer_id == meta.producer_id and producer_epoch == meta.last_producer_epoch \
                    and producer_epoch != meta.producer_epoch and meta.state is S.EMPTY:
                return reply(E.none, meta.producer_id, meta.producer_epoch)  # a retried bump
            if not (producer_id == meta.producer_id and producer_epoch == meta.producer_epoch) \
                    and producer_id != meta.previous_producer_id:
                return reply(E.producer_fenced)
        if meta.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            transit = self._bump(meta, transaction_timeout_ms, now, expected=producer_id != NO_PRODUCER_ID)
            return self._write(meta, transit, lambda: reply(E.none, transit.producer_id, transit.producer_epoch),
                               reply)
        if meta.state is S.ONGOING:
            # Fence the current producer and abort its transaction; the caller retries.
            return self._abort(meta, fence=True, on_done=lambda: reply(E.concurrent_transactions), on_failure=reply)
        return reply(E.concurrent_transactions)  # PrepareCommit / PrepareAbort / Dead

    def _bump(self, meta: TransactionMetadata, timeout_ms: int, now: int, *, expected: bool) -> TxnTransitMetadata:
        """Kafka `prepareIncrementProducerEpoch` / `prepareProducerIdRotation`. The last epoch
        is remembered only for a producer that named its epoch (KIP-360), so its retry of
        this very request gets the same answer."""
        if is_epoch_exhausted(meta.producer_epoch):
            return meta.transit(S.EMPTY, now, producer_id=self._next_producer_id(),
                                previous_producer_id=meta.producer_id, producer_epoch=0,
                                last_producer_epoch=NO_PRODUCER_EPOCH, transaction_timeout_ms=timeout_ms,
                                partitions=frozenset(), start_timestamp_ms=-1)
        return meta.transit(S.EMPTY, now, producer_epoch=meta.producer_epoch + 1,
                            last_producer_epoch=meta.producer_epoch if expected else NO_PRODUCER_EPOCH,
                            transaction_timeout_ms=timeout_ms,
                            partitions=frozenset(), start_timestamp_ms=-1)

    # ---- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------

    def add_partitions(self, request_id: int, *, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition]) -> TxnOutput:
        """Kafka `handleAddPartitionsToTransaction`: the answer (one error for all the
        partitions) comes once the Ongoing state naming them is persisted. AddOffsetsToTxn
        adds the group's `__consumer_offsets` partition the same way."""

        def reply(error: ErrorCode) -> TxnOutput:
            return TxnOutput(responses=[(request_id, error)])

        meta, err = self._checked(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return reply(err)
        if meta.pending_state is not None or meta.state.is_prepare or meta.state is S.DEAD:
            return reply(E.concurrent_transactions)
        wanted = set(partitions)
        if meta.state is S.ONGOING and wanted <= meta.partitions:
            return reply(E.none)
        now = self.clock.now_ms()
        start = meta.start_timestamp_ms if meta.state is S.ONGOING else now
        transit = meta.transit(S.ONGOING, now, partitions=frozenset(meta.partitions | wanted),
                               start_timestamp_ms=start)
        return self._write(meta, transit, lambda: reply(E.none), reply)

    def verify_partitions(self, *, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 part 1 (AddPartitionsToTxn `verify_only`): is each partition part of the
        producer's ongoing transaction? A partition leader asks before it appends the first
        transactional batch of a producer, so a late batch of a finished transaction cannot
        open a transaction nobody will end. Nothing is written."""
        wanted = list(partitions)
        meta, err = self._checked(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return dict.fromkeys(wanted, err)
        ongoing = meta.state is S.ONGOING
        return {tp: E.none if ongoing and tp in meta.partitions else E.invalid_txn_state for tp in wanted}

    def _checked(self, transactional_id: str, producer_id: int,
                 producer_epoch: int) -> tuple[TransactionMetadata | None, ErrorCode]:
        if not transactional_id:
            return None, E.invalid_request
        err = self.coordinator_error(transactional_id)
        if err is not None:
            return None, err
        meta = self.state.transactions.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return None, E.invalid_producer_id_mapping
        if meta.producer_epoch != producer_epoch:
            return None, E.producer_fenced
        return meta, E.none

    # ---- EndTxn ----------------------------------------------------------------------

    def end_txn(self, request_id: int, *, transactional_id: str, producer_id: int, producer_epoch: int,
                committed: bool) -> TxnOutput:
        """Kafka `handleEndTransaction` (from a client): answered once PrepareCommit /
        PrepareAbort is persisted; the markers and the Complete* record follow."""

        def reply(error: ErrorCode) -> TxnOutput:
            return TxnOutput(responses=[(request_id, error)])

        meta, err = self._checked(transactional_id, producer_id, producer_epoch)
        if meta is None:
            return reply(err)
        if meta.pending_state is not None:
            return reply(E.concurrent_transactions)
        state = meta.state
        if state is S.ONGOING:
            if committed:
                return self._write(meta, meta.transit(S.PREPARE_COMMIT, self.clock.now_ms()),
                                   lambda: self._prepared(meta, reply(E.none)), reply)
            return self._abort(meta, fence=False, on_done=lambda: reply(E.none), on_failure=reply)
        if state is S.COMPLETE_COMMIT:
            return reply(E.none if committed else E.invalid_txn_state)  # a retried EndTxn
        if state is S.COMPLETE_ABORT:
            return reply(E.invalid_txn_state if committed else E.none)
        if state is S.PREPARE_COMMIT:
            return reply(E.concurrent_transactions if committed else E.invalid_txn_state)
        if state is S.PREPARE_ABORT:
            return reply(E.invalid_txn_state if committed else E.concurrent_transactions)
        return reply(E.invalid_txn_state)  # Empty, Dead

    def _abort(self, meta: TransactionMetadata, *, fence: bool, on_done: Callable[[], TxnOutput],
               on_failure: Callable[[ErrorCode], TxnOutput]) -> TxnOutput:
        """Ongoing -> PrepareAbort. With `fence` (InitProducerId during the transaction, or
        its timeout) the epoch is bumped first, so the producer's later requests and
        batches of the old epoch are refused (Kafka `prepareFenceProducerEpoch`)."""
        now = self.clock.now_ms()
        changes: dict[str, object] = {}
        if fence:
            meta.pending_state = transition(meta.state, S.PREPARE_EPOCH_FENCE)
            if not is_epoch_exhausted(meta.producer_epoch):
                changes = {"producer_epoch": meta.producer_epoch + 1, "last_producer_epoch": meta.producer_epoch}
        transit = meta.transit(S.PREPARE_ABORT, now, **changes)
        meta.pending_state = None
        return self._write(meta, transit, lambda: self._prepared(meta, on_done()), on_failure)

    def _prepared(self, meta: TransactionMetadata, answer: TxnOutput) -> TxnOutput:
        return answer.extend(self._send_markers(meta))

    # ---- markers ---------------------------------------------------------------------

    def _send_markers(self, meta: TransactionMetadata) -> TxnOutput:
        if not meta.partitions:
            return self._complete(meta)
        self._markers_pending[meta.transactional_id] = set(meta.partitions)
        self._markers_done.discard(meta.transactional_id)
        epoch = self.state.coordinator_epochs.get(self.partition_for(meta.transactional_id), 0)
        return TxnOutput(markers=[TxnMarker(meta.transactional_id, meta.producer_id, meta.producer_epoch, epoch,
                                            meta.state is S.PREPARE_COMMIT, frozenset(meta.partitions))])

    def marker_wanted(self, marker: TxnMarker, tp: TopicPartition) -> bool:
        """False once the marker is written, or the transaction moved on or left this node."""
        meta = self.state.transactions.get(marker.transactional_id)
        return (meta is not None and meta.producer_id == marker.producer_id
                and meta.producer_epoch == marker.producer_epoch
                and tp in self._markers_pending.get(marker.transactional_id, ()))

    def on_marker_written(self, marker: TxnMarker, tp: TopicPartition) -> TxnOutput:
        """The leader of `tp` wrote the marker (or `tp` no longer exists). The last one
        completes the transaction."""
        if not self.marker_wanted(marker, tp):
            return TxnOutput()
        pending = self._markers_pending[marker.transactional_id]
        pending.discard(tp)
        if pending:
            return TxnOutput()
        del self._markers_pending[marker.transactional_id]
        return self._complete(self.state.transactions[marker.transactional_id])

    def _complete(self, meta: TransactionMetadata) -> TxnOutput:
        """PrepareCommit -> CompleteCommit, PrepareAbort -> CompleteAbort (Kafka
        `TransactionMarkerChannelManager.tryAppendToLog`). Should the write fail, the
        periodic check writes it again."""
        self._markers_done.add(meta.transactional_id)
        target = S.COMPLETE_COMMIT if meta.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        transit = meta.transit(target, self.clock.now_ms(), partitions=frozenset())

        def done() -> TxnOutput:
            self._markers_done.discard(meta.transactional_id)
            return TxnOutput()

        return self._write(meta, transit, done, lambda _error: TxnOutput())

    # ---- DescribeTransactions / ListTransactions -------------------------------------

    def describe(self, transactional_id: str) -> DescribedTransaction:
        err = self.coordinator_error(transactional_id)
        if err is not None:
            return DescribedTransaction(transactional_id, err)
        meta = self.state.transactions.get(transactional_id)
        if meta is None or meta.state is S.DEAD:
            return DescribedTransaction(transactional_id, E.transactional_id_not_found)
        return DescribedTransaction(
            transactional_id, E.none, meta.state.state_name, meta.transaction_timeout_ms, meta.start_timestamp_ms,
            meta.producer_id, meta.producer_epoch, tuple(sorted(meta.partitions, key=lambda tp: (tp.topic,
                                                                                             tp.partition))))

    def list_transactions(self, state_filters: Iterable[str], producer_id_filters: Iterable[int],
                          duration_filter_ms: int = -1, transactional_id_pattern: ClientRegex | None = None,
                          ) -> tuple[tuple[ListedTransaction, ...], tuple[str, ...]]:
        """(transactions, unknown state filters) as Kafka `TransactionStateManager.listTransactionStates`:
        `duration_filter_ms` >= 0 keeps transactions running longer than that, a pattern
        (KIP-1152) the transactional ids it matches whole."""
        states = {s: TransactionState.from_name(s) for s in state_filters}
        unknown = tuple(name for name, state in states.items() if state is None)
        wanted_states = {s for s in states.values() if s is not None}
        pids = set(producer_id_filters)
        now = self.clock.now_ms()
        out = []
        for txn_id, meta in sorted(self.state.transactions.items()):
            if self.coordinator_error(txn_id) is not None or meta.state is S.DEAD:
                continue
            if states and meta.state not in wanted_states:
                continue
            if pids and meta.producer_id not in pids:
                continue
            if transactional_id_pattern is not None and not transactional_id_pattern.fullmatch(txn_id):
                continue
            if duration_filter_ms >= 0 and (meta.state is not S.ONGOING
                                            or now - meta.start_timestamp_ms < duration_filter_ms):
                continue
            out.append(ListedTransaction(txn_id, meta.producer_id, meta.state.state_name))
        return tuple(out), unknown

    # ---- periodic checks -------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for d in (self._next_abort_check_ms, self._next_expire_check_ms) if d is not None]
        return min(deadlines) if deadlines else None

    def poll(self, now_ms: int) -> TxnOutput:
        """Run the checks that are due (monotonic `now_ms`): abort timed-out transactions and
        finish stuck completions (`transaction.abort.timed.out.transaction.cleanup.interval.ms`),
        remove expired transactional ids (`transaction.remove.expired.transaction.cleanup.interval.ms`)."""
        out = TxnOutput()
        if self._next_abort_check_ms is not None and now_ms >= self._next_abort_check_ms:
            self._next_abort_check_ms = now_ms + self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms
            out.extend(self.abort_timed_out_transactions())
        if self._next_expire_check_ms is not None and now_ms >= self._next_expire_check_ms:
            self._next_expire_check_ms = now_ms + self.config.transaction_remove_expired_transaction_cleanup_interval_ms
            out.extend(self.remove_expired_transactional_ids())
        return out

    def abort_timed_out_transactions(self) -> TxnOutput:
        """Kafka `abortTimedOutTransactions`: an Ongoing transaction older than its
        `transaction.timeout.ms` is fenced and aborted."""
        now = self.clock.now_ms()
        out = TxnOutput()
        for txn_id, meta in list(self.state.transactions.items()):
            if self.coordinator_error(txn_id) is not None or meta.pending_state is not None:
                continue
            if meta.state is S.ONGOING and meta.start_timestamp_ms + meta.transaction_timeout_ms < now:
                out.extend(self._abort(meta, fence=True, on_done=TxnOutput, on_failure=lambda _e: TxnOutput()))
            elif txn_id in self._markers_done:
                out.extend(self._complete(meta))
            elif meta.state.is_prepare and txn_id not in self._markers_pending:
                out.extend(self._send_markers(meta))
        return out

    def remove_expired_transactional_ids(self) -> TxnOutput:
        """Kafka `removeExpiredTransactionalIds`: an id idle (Empty or Complete*) for
        `transactional.id.expiration.ms` gets a tombstone and is forgotten."""
        now = self.clock.now_ms()
        out = TxnOutput()
        for txn_id, meta in list(self.state.transactions.items()):
            if self.coordinator_error(txn_id) is not None or meta.pending_state is not None:
                continue
            if meta.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
                continue
            if meta.last_update_timestamp_ms + self.config.transactional_id_expiration_ms > now:
                continue
            out.extend(self._tombstone(meta))
        return out

    def _tombstone(self, meta: TransactionMetadata) -> TxnOutput:
        transit = meta.transit(S.DEAD, self.clock.now_ms())
        partition = self.partition_for(meta.transactional_id)

        def removed() -> TxnOutput:
            current = self.state.transactions.get(meta.transactional_id)
            if current is meta:
                del self.state.transactions[meta.transactional_id]
            return TxnOutput()

        return self._append(meta, transit, partition, [(records.key_bytes(meta.transactional_id), None)],
                            removed, lambda _e: TxnOutput())

    # ---- persistence -----------------------------------------------------------------

    def _write(self, meta: TransactionMetadata, transit: TxnTransitMetadata, on_success: Callable[[], TxnOutput],
               on_failure: Callable[[ErrorCode], TxnOutput]) -> TxnOutput:
        partition = self.partition_for(meta.transactional_id)
        record = (records.key_bytes(meta.transactional_id), records.value_bytes(transit.log_value()))
        return self._append(meta, transit, partition, [record], on_success, on_failure)

    def _append(self, meta: TransactionMetadata, transit: TxnTransitMetadata, partition: int,
                recs: list[tuple[bytes, bytes | None]], on_success: Callable[[], TxnOutput],
                on_failure: Callable[[ErrorCode], TxnOutput]) -> TxnOutput:
        meta.pending_state = transit.state
        self._next_ticket += 1
        ticket = self._next_ticket
        epoch = self.state.coordinator_epochs.get(partition, -1)
        self._waiting[ticket] = _Waiting(meta.transactional_id, partition, epoch, transit, on_success, on_failure)
        return TxnOutput(appends=[Append(ticket, partition, recs)])

    def on_append_completed(self, ticket: int, error: ErrorCode = E.none) -> TxnOutput:
        waiting = self._waiting.pop(ticket)
        meta = self.state.transactions.get(waiting.transactional_id)
        if meta is not None:
            meta.pending_state = None
        if self.state.coordinator_epochs.get(waiting.partition) != waiting.coordinator_epoch or meta is None:
            return waiting.on_failure(E.not_coordinator)  # the partition moved while writing
        if error != E.none:
            return waiting.on_failure(append_error(error))
        meta.apply(waiting.transit)
        return waiting.on_success()
