"""Transactions in the simulation (KIP-98, with the coordinator failing over).

Each cluster runs the real sans-IO `TransactionCoordinator` over `__transaction_state-0` of its
broker, and one transactional producer (`transactional.id` `txn-<cluster>`) that writes
transactions of a few batches over `t`'s partitions while its cluster takes writes. Simulated:
- the marker channel: the markers of a PrepareCommit / PrepareAbort wait in flight and are
  delivered one partition at a time (so a transaction is committed on one partition before
  the other, as with real WriteTxnMarkers);
- the coordinator's process: a crash of the cluster loses it and every marker in flight; the
  restarted broker loads `__transaction_state` again and the core re-sends the markers of
  every PrepareCommit / PrepareAbort (Kafka `TransactionCoordinator.onElection`); a
  coordinator move bumps the partition's leader epoch (the coordinator epoch), unloads and
  loads it.

Every record of a transaction carries its tag (`<cluster>-x<n>.<i>`), so the invariants
(`txn_invariants`) can tell from the log alone which transaction a record belongs to and how
that transaction ended on each partition.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kmirror.coordinator.offsets.log_adapter import ReplicaManagerCoordinatorLog
from kmirror.coordinator.results import Output
from kmirror.coordinator.transaction.config import TRANSACTION_STATE_TOPIC, TransactionConfig
from kmirror.coordinator.transaction.coordinator import TransactionCoordinator
from kmirror.coordinator.transaction.results import TxnMarker
from kmirror.protocol.errors import ErrorCode
from kmirror.records.builder import build_batch
from kmirror.records.control import build_end_txn_marker
from kmirror.replication.outcomes import PartitionError
from kmirror.types import TopicPartition

if TYPE_CHECKING:
    from kmirror.testing.sim.cluster import SimCluster

E = ErrorCode
TXN_STATE = TopicPartition(TRANSACTION_STATE_TOPIC, 0)
TXN_TIMEOUT_MS = 15_000
TXN_CONFIG = TransactionConfig(transaction_state_log_num_partitions=1, transaction_max_timeout_ms=60_000,
                               transaction_abort_timed_out_transaction_cleanup_interval_ms=1000)
TAG_MARK = b"-x"


def tag_of(value: bytes) -> bytes | None:
    """The transaction tag of a record value (`A-x7.2` -> `A-x7`), None for other records."""
    head = value.split(b".", 1)[0]
    return head if TAG_MARK in head else None


@dataclass
class OpenTxn:
    tag: bytes
    partitions: set[int] = field(default_factory=set)
    records: int = 0


class SimTransactions:
    def __init__(self, cluster: SimCluster, rng: random.Random, topic: str, partitions: int) -> None:
        self.cluster = cluster
        self.rng = rng
        self.topic = topic
        self.partitions = partitions
        self.transactional_id = f"txn-{cluster.name}"
        self.core: TransactionCoordinator | None = None
        self.in_flight: list[tuple[TxnMarker, TopicPartition]] = []
        # the producer's side
        self.producer_id, self.producer_epoch = -1, -1
        self.sequences: dict[int, int] = {}
        self.open: OpenTxn | None = None
        self.count = 0
        self.acknowledged: dict[bytes, bool] = {}  # tag -> committed, as EndTxn answered it
        self._next_request = 0

    # -- the coordinator's process --------------------------------------------------------

    def boot(self) -> str:
        """The coordinator (re)starts on this broker: load `__transaction_state-0`; what a
        previous instance left prepared gets its markers again."""
        c = self.cluster
        self.in_flight = []
        self.core = TransactionCoordinator(TXN_CONFIG, c.clock, c.allocate_producer_id,
                                           lambda _partition: c.txn_state_epoch)
        self.core.begin_load(0)
        records = list(ReplicaManagerCoordinatorLog(c.rm, TRANSACTION_STATE_TOPIC).read_all(0))
        self._execute(self.core.complete_load(0, records))
        return f"txn coordinator {c.name} loaded (epoch {c.txn_state_epoch}, {len(self.in_flight)} markers owed)"

    def crash(self) -> None:
        self.core = None
        self.in_flight = []

    def move(self) -> str:
        """The coordinator fails over without a crash (another leader epoch for the partition):
        the old instance unloads and forgets its markers in flight, the new one loads."""
        c = self.cluster
        if self.core is not None:
            self.core.unload(0)
        c.txn_state_epoch += 1
        c.publish()
        return self.boot()

    def _execute(self, out: Output) -> dict[int, Any]:
        """The shell's order: append (acks: RF=1 here), report, then markers and answers."""
        core = self.core
        assert core is not None
        answers: dict[int, Any] = {}
        for append in out.appends:
            batch = build_batch([(k, v, (), -1) for k, v in append.records], now_ms=self.cluster.clock.now_ms())
            result = self.cluster.rm.append_to_local_log(TopicPartition(TRANSACTION_STATE_TOPIC, append.partition),
                                                         batch)
            error = result.code if isinstance(result, PartitionError) else E.none
            answers.update(self._execute(core.on_append_completed(append.ticket, error)))
        for marker in getattr(out, "markers", ()):
            self.in_flight += [(marker, tp) for tp in sorted(marker.partitions, key=lambda t: t.partition)]
        answers.update(out.responses)
        return answers

    def _request(self, call: Callable[[int], Output]) -> Any:
        self._next_request += 1
        return self._execute(call(self._next_request)).get(self._next_request)

    def deliver_marker(self) -> str:
        """One owed marker reaches its partition's leader (WriteTxnMarkers)."""
        core, c = self.core, self.cluster
        self.in_flight = [(m, tp) for m, tp in self.in_flight if core is not None and core.marker_wanted(m, tp)]
        if core is None or not self.in_flight:
            return f"txn markers {c.name}: none owed"
        marker, tp = self.in_flight.pop(self.rng.randrange(len(self.in_flight)))
        kind = "COMMIT" if marker.commit else "ABORT"
        if c.rm.get_partition(tp) is None:  # the topic is gone: the marker is not owed any more
            line = f"txn {kind} marker of pid {marker.producer_id} on {tp}: topic gone"
        else:
            control = build_end_txn_marker(marker.commit, marker.producer_id, marker.producer_epoch,
                                           c.clock.now_ms(), marker.coordinator_epoch)
            result = c.rm.append_coordinator_batches(tp, control)
            if isinstance(result, PartitionError):
                self.in_flight.append((marker, tp))  # retried
                return f"txn {kind} marker on {tp}: {result.code.name}"
            line = f"txn {kind} marker of pid {marker.producer_id} on {tp} at {result.base_offset}"
        self._execute(core.on_marker_written(marker, tp))
        return line

    def poll(self) -> str:
        """The coordinator's periodic checks: abort timed-out transactions (fenced)."""
        if self.core is None:
            return ""
        before = len(self.in_flight)
        self._execute(self.core.poll(self.cluster.clock.monotonic_ms()))
        return f"; txn coordinator {self.cluster.name} aborts timed out" if len(self.in_flight) > before else ""

    # -- the transactional producer ---------------------------------------------------------

    def _abandon(self, why: str) -> str:
        """The producer gives up on its transaction and starts over with InitProducerId (which
        fences it and aborts the transaction, as its timeout would)."""
        self.producer_id = -1
        self.open = None
        return why

    def produce(self) -> str:
        c, core = self.cluster, self.core
        name = f"txn produce {c.name}"
        if core is None or not c.alive:
            return f"{name}: down"
        if self.producer_id < 0:
            init = self._request(lambda rid: core.init_producer_id(
                rid, transactional_id=self.transactional_id, transaction_timeout_ms=TXN_TIMEOUT_MS))
            if init.error != E.none:
                return f"{name}: InitProducerId {init.error.name}"
            self.producer_id, self.producer_epoch, self.sequences = init.producer_id, init.producer_epoch, {}
        p = self.rng.randrange(self.partitions)
        tp = TopicPartition(self.topic, p)
        if not c.topic_present or c.read_only(p):
            return f"{name} p{p}: not writable here"
        if self.open is None:
            self.count += 1
            self.open = OpenTxn(b"%s-x%d" % (c.name.encode(), self.count))
        txn = self.open
        if p not in txn.partitions:
            error = self._request(lambda rid: core.add_partitions(
                rid, transactional_id=self.transactional_id, producer_id=self.producer_id,
                producer_epoch=self.producer_epoch, partitions=[tp]))
            if error in (E.concurrent_transactions, E.coordinator_load_in_progress):
                return f"{name} p{p}: AddPartitionsToTxn {error.name} (retried later)"
            if error != E.none:
                return self._abandon(f"{name} p{p}: AddPartitionsToTxn {error.name}, starts over")
            txn.partitions.add(p)
        seq, n = self.sequences.get(p, 0), self.rng.randint(1, 3)
        values = [txn.tag + b".%d" % (txn.records + i) for i in range(n)]
        batch = build_batch([(None, v, (), c.clock.now_ms()) for v in values], producer_id=self.producer_id,
                            producer_epoch=self.producer_epoch, base_sequence=seq, is_transactional=True)
        result = c.rm.append_records({tp: batch}, 1)[tp]
        line = f"{name} {txn.tag.decode()} p{p} pid={self.producer_id}/{self.producer_epoch} seq={seq} n={n}"
        if isinstance(result, PartitionError):
            return self._abandon(f"{line}: {result.code.name}, starts over")
        self.sequences[p] = seq + n
        txn.records += n
        return f"{line}: offsets {result.base_offset}..{result.last_offset}"

    def end(self, commit: bool) -> str:
        c, core, txn = self.cluster, self.core, self.open
        kind = "commit" if commit else "abort"
        if core is None or not c.alive or txn is None:
            return f"txn {kind} {c.name}: nothing open"
        if not txn.partitions:
            self.open = None
            return f"txn {kind} {c.name}: empty"
        error = self._request(lambda rid: core.end_txn(
            rid, transactional_id=self.transactional_id, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, committed=commit))
        if error in (E.concurrent_transactions, E.coordinator_load_in_progress):
            return f"txn {kind} {c.name} {txn.tag.decode()}: {error.name} (retried later)"
        if error != E.none:
            return self._abandon(f"txn {kind} {c.name} {txn.tag.decode()}: {error.name}, starts over")
        self.acknowledged[txn.tag] = commit
        self.open = None
        return f"txn {kind} {c.name} {txn.tag.decode()}: acknowledged, {len(self.in_flight)} markers owed"

    def finish(self) -> str:
        """End what is open (commit or abort), let the coordinator abort what was abandoned
        (its timeout) and deliver every marker: afterwards no transaction is open."""
        c = self.cluster
        if not c.alive or self.core is None:
            return f"txn finish {c.name}: down"
        lines = []
        if self.open is not None:
            lines.append(self.end(self.rng.random() < 0.6))
            if self.open is not None:  # refused: abandoned, the timeout aborts it
                self._abandon("")
        for _ in range(3):
            c.clock.advance(TXN_TIMEOUT_MS + TXN_CONFIG.transaction_abort_timed_out_transaction_cleanup_interval_ms)
            self.poll()
            for _ in range(100):
                if not self.in_flight:
                    break
                self.deliver_marker()
        return f"txn finish {c.name}: " + ("; ".join(lines) or "nothing open")
