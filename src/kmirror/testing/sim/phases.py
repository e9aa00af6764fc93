"""Failover, failback and settle: the phase changes of the simulation (KIP-1279 "Failover",
"Failback") and what the destination must hold when it becomes writable."""

from __future__ import annotations

from kmirror.testing.sim import invariants as inv
from kmirror.testing.sim.base import FAILING_OVER, MIRRORING, S
from kmirror.testing.sim.cluster import MIRROR, PARTITIONS, TOPIC
from kmirror.testing.sim.network import SimSourceCluster
from kmirror.testing.sim.txn_events import TransactionEvents
from kmirror.types import TopicPartition


class FailoverPhases(TransactionEvents):
    def settle(self) -> str:
        """Heal every fault, resume, and run until the destination holds the source's
        committed log: it must get there."""
        self.heal()
        d, s = self.dst, self.src
        finished = self.finish_transactions(s)  # the mirror copies up to the source's LSO
        self.check_no_open_transaction(s, "after its transactions finished")
        if d.mirror_name == MIRROR + ".paused":
            for _ in range(5):
                if all(d.state(p) is S.PAUSED for p in range(PARTITIONS)):
                    break
                self.run_manager(d)
            d.mirror_name = MIRROR
            d.publish()
        for _ in range(40):
            self.run_manager(d)
            self.fetch(d)
            self.clock.advance(1100)
            if self._converged():
                self.coverage.converged += 1
                for c in self.clusters():
                    self.check_no_open_transaction(c, "settled")
                return f"settle: {finished}; converged " + " ".join(
                    f"p{p}@{leo}" for p, leo in enumerate(d.log_end_offsets()))
        self.violations.append(f"{d.name} did not converge to {s.name}: "
                               + "; ".join(self.describe(c) for c in self.clusters()))
        return "settle: no convergence"

    def _converged(self) -> bool:
        d, s = self.dst, self.src
        for p in range(PARTITIONS):
            tp = TopicPartition(TOPIC, p)
            if d.state(p) is not S.MIRRORING:
                return False
            hw = s.rm.get_partition(tp).log.high_watermark
            want = [b for b in inv.stored_batches(s.rm, tp) if b.last_offset < hw]
            if inv.stored_batches(d.rm, tp) != want:
                return False
        return True

    def failover(self) -> str:
        d = self.dst
        if not d.alive:
            self.restart(d)
        disaster = self.rng.random() < 0.5
        d.mirror_name = MIRROR + ".removed"
        d.publish()
        self.phase, self.phase_events = FAILING_OVER, 0
        self.coverage.failovers += 1
        line = f"failover on {d.name}: remove {TOPIC} from {MIRROR}"
        if disaster:  # the source is gone: the failover must complete without it
            self.coverage.disaster_failovers += 1
            self.net.down = True
            d.store.unavailable = False
            d.bumper.fails = False
            passes = [self.run_manager(d) for _ in range(6)]
            line += " | " + " | ".join(dict.fromkeys(passes))
            if not all(d.accepts_writes(p) for p in range(PARTITIONS)):
                self.violations.append(f"disaster failover on {d.name} did not complete with the source "
                                       f"unreachable: {self.describe(d)}; {self.trace_tail_hint()}")
            line = line.replace(" | ", " (disaster: link down) | ", 1)
        return line

    def failback(self) -> str:
        old, active = self.src, self.dst
        if not all(active.accepts_writes(p) for p in range(PARTITIONS)):
            return "failback: refused (partitions not all detached yet) " + self.run_manager(active)
        if not old.alive:
            self.restart(old)
        # the old side's transactions end before it becomes a mirror: no marker of its own
        # may land on a mirror partition afterwards
        finished = self.finish_transactions(old)
        old.broker.flush()
        for p in range(PARTITIONS):
            tp = TopicPartition(TOPIC, p)
            self.preexisting[p] = {(b.base_offset, b.raw) for b in inv.stored_batches(old.rm, tp)}
        old.mirror_source = SimSourceCluster(active, self.net)
        old.mirror_name = MIRROR
        old.publish()
        self.src, self.dst = active, old
        self.phase, self.phase_events = MIRRORING, 0
        self.cut_done = set()
        self.coverage.failbacks += 1
        return f"failback: {finished}; {old.name} mirrors {active.name} as {MIRROR}; " + self.run_manager(old)


    def _failover_cut(self, p: int) -> None:
        """The destination just became writable: its log is the mirrored prefix [0, F) and a
        MIRROR_PID_RESET at F in an epoch above every mirrored one; acknowledged records below
        F are all there, and the destination becomes the side whose records must survive."""
        d = self.dst
        tp = TopicPartition(TOPIC, p)
        batches = inv.stored_batches(d.rm, tp)
        self.cut_done.add(p)
        if d.state(p) is S.UNKNOWN and (not batches or not batches[-1].is_mirror_pid_reset):
            # Removed before its start ever persisted a state: nothing was mirrored in this
            # attachment, so nothing needed detaching; the log is what the side held before.
            fresh = [b.base_offset for b in batches if (b.base_offset, b.raw) not in self.preexisting[p]]
            if fresh:
                self.violations.append(f"{d.name} p{p}: writable without state or MIRROR_PID_RESET but holds "
                                       f"mirrored batches at {fresh}")
            self.acked[p] = {}
            self.primary[p] = d
            return
        if not batches or not batches[-1].is_mirror_pid_reset:
            self.violations.append(f"{d.name} p{p}: writable after failover without a trailing MIRROR_PID_RESET")
            return
        reset = batches[-1]
        mirrored_max = max((b.leader_epoch for b in batches[:-1]), default=-1)
        if reset.leader_epoch <= mirrored_max:
            self.violations.append(f"{d.name} p{p}: MIRROR_PID_RESET epoch {reset.leader_epoch} not above the "
                                   f"mirrored epochs ({mirrored_max})")
        point = reset.base_offset
        values = inv.record_values(batches)
        for offset, value in self.acked[p].items():
            if offset < point and values.get(offset) != value:
                self.violations.append(f"{d.name} p{p}: acknowledged record at {offset} < failover point {point} "
                                       f"missing after failover")
                break
        self.acked[p] = {o: v for o, v in self.acked[p].items() if o < point}
        self.primary[p] = d
        self.check_no_open_transaction(d, "after failover", range(p, p + 1))

