"""The transaction events of the simulation and their invariants (`transactions`,
`txn_invariants`): a transactional producer on each side that takes writes, markers delivered
one partition at a time, the coordinator moving to another epoch, and a crash of the
coordinator's broker in the middle of EndTxn (PrepareCommit persisted, markers not all
written). They draw from their own generator, after the mirror's event of the step.

Checked after every event, on both clusters: the markers' reading of each partition and a
read_committed consumer's (LSO and `.txnindex`) agree; no transaction is committed on one
partition and aborted on another, and each ends as EndTxn acknowledged it. Once transactions
are finished and the clusters settled: no transaction is open and the LSO equals the HW on
every partition of both clusters. At failover: the destination holds no open transaction.
"""

from __future__ import annotations

from kmirror.testing.sim import invariants as inv
from kmirror.testing.sim import txn_invariants as txn_inv
from kmirror.testing.sim.base import SimulationBase
from kmirror.testing.sim.cluster import PARTITIONS, TOPIC, SimCluster
from kmirror.types import TopicPartition

TXN_EVENT_RATE = 0.5


class TransactionEvents(SimulationBase):
    def _takes_writes(self, c: SimCluster) -> bool:
        return c.alive and c.topic_present and any(c.accepts_writes(p) for p in range(PARTITIONS))

    def transaction_event(self) -> str | None:
        rng = self.txn_rng
        if rng.random() >= TXN_EVENT_RATE:
            return None
        r = rng.random()
        dead = [c for c in self.clusters() if not c.alive]
        if dead and r < 0.1:
            return self.restart(dead[0])
        writers = [c for c in self.clusters() if self._takes_writes(c)]
        if not writers:
            return None
        c = rng.choice(writers)
        t = c.txn
        if r < 0.45:
            return t.produce()
        if r < 0.60:
            commit = rng.random() < 0.7
            line = t.end(commit)
            if t.open is None and line.endswith("markers owed"):
                if commit:
                    self.coverage.transactions_committed += 1
                else:
                    self.coverage.transactions_aborted += 1
            return line
        if r < 0.82:
            return t.deliver_marker()
        if r < 0.87:
            return "txn poll" + t.poll()
        if r < 0.91:
            self.coverage.txn_coordinator_moves += 1
            return t.move()
        if r < 0.97 and t.open is not None and t.open.partitions:
            return self.crash_mid_end_txn(c)
        return t.produce()

    def crash_mid_end_txn(self, c: SimCluster) -> str:
        """EndTxn(commit) is acknowledged (PrepareCommit persisted), some of its markers are
        written, then the coordinator's broker dies; its restart must finish the commit."""
        t = c.txn
        line = t.end(True)
        if t.open is not None:
            return line
        self.coverage.transactions_committed += 1
        for _ in range(self.txn_rng.randrange(len(t.in_flight) + 1) if t.in_flight else 0):
            if len(t.in_flight) > 1:
                line += "; " + t.deliver_marker()
        self.coverage.txn_coordinator_crashes_mid_end_txn += 1
        return f"{line}; {self.crash(c)} mid-EndTxn"

    def finish_transactions(self, c: SimCluster) -> str:
        """End or abort what `c`'s producer has open and deliver every marker owed."""
        if not c.alive:
            self.restart(c)
        return c.txn.finish()

    def check_transactions(self) -> None:
        acknowledged = {**self.a.txn.acknowledged, **self.b.txn.acknowledged}
        for c in self.clusters():
            if not c.alive:
                continue
            views = {}
            for p in range(PARTITIONS):
                tp = TopicPartition(TOPIC, p)
                part = c.rm.get_partition(tp)
                if part is None:
                    continue
                views[p], found = txn_inv.check_partition(f"{c.name} p{p}", part.log, inv.stored_batches(c.rm, tp))
                self.violations += found
            self.violations += txn_inv.whole(c.name, views, acknowledged)

    def check_no_open_transaction(self, c: SimCluster, when: str, partitions: range = range(PARTITIONS)) -> None:
        """Every transaction of `c`'s partitions has its marker: the LSO reached the HW."""
        if not c.alive:
            return
        for p in partitions:
            tp = TopicPartition(TOPIC, p)
            part = c.rm.get_partition(tp)
            if part is None:
                continue
            log = part.log
            view = txn_inv.by_markers(inv.stored_batches(c.rm, tp), log.last_stable_offset)
            if view.open_tags or log.last_stable_offset != log.high_watermark:
                self.violations.append(f"{c.name} p{p} {when}: LSO {log.last_stable_offset} != HW "
                                       f"{log.high_watermark}, open transactions "
                                       f"{sorted(t.decode() for t in view.open_tags)}")
