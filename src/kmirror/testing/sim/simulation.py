"""The two-cluster mirror simulation: A and B, mirror `m`, one topic with two partitions.

Phases, repeated: MIRRORING (the destination copies the source; random produce, fetch rounds,
manager passes, ticks, network faults and held answers, leader changes on either side,
destination crashes losing unflushed bytes, coordinator and controller outages, pause and
resume) -> failover (`mirror.name` becomes `m.removed` on the destination; half the time a
disaster: the link is down) -> FAILED_OVER (both sides take writes: the new active side and
the old source, which diverges; leader changes on the old source give the KIP's example B)
-> failback (the old source gets mirror `m` towards the new active side and adds the topic
back: LME truncation, then the fetch protocol's divergence check) -> MIRRORING the other way.

Invariants after every event: see `check` and `kmirror.testing.sim.invariants`.
"""

from __future__ import annotations

from typing import Any

from kmirror.testing.sim import invariants as inv
from kmirror.testing.sim.base import (
    ATTACHED_STATES,
    FAILED_OVER,
    FAILING_OVER,
    MIRRORING,
    SOURCE_DELETED,
    Coverage,
    S,
    SimulationFailure,
)
from kmirror.testing.sim.cluster import MIRROR, PARTITIONS, TOPIC
from kmirror.testing.sim.deletion import SourceTopicDeletion
from kmirror.testing.sim.phases import FailoverPhases
from kmirror.types import TopicPartition

__all__ = ["MirrorSimulation", "SimulationFailure", "run_seed"]


class MirrorSimulation(FailoverPhases, SourceTopicDeletion):
    # -- events --------------------------------------------------------------------------

    def pause_or_resume(self) -> str:
        d = self.dst
        if d.mirror_name == MIRROR and all(d.state(p) is S.MIRRORING for p in range(PARTITIONS)):
            d.mirror_name = MIRROR + ".paused"
            self.coverage.pauses += 1
        elif d.mirror_name == MIRROR + ".paused" and all(d.state(p) is S.PAUSED for p in range(PARTITIONS)):
            d.mirror_name = MIRROR
        else:
            return "pause/resume: refused (partitions not all MIRRORING / PAUSED)"
        d.publish()
        return f"mirror.name={d.mirror_name} on {d.name}; " + self.run_manager(d)


    def step(self) -> str:
        self.phase_events += 1
        r = self.rng.random()
        d = self.dst
        if self.phase == SOURCE_DELETED:
            return self._step_source_deleted()
        if self.phase == MIRRORING:
            if self.phase_events > 20 and 0.03 <= r < 0.03 + self.deletion_rate and self._deletion_allowed():
                return self.delete_source_topic()
            if self.phase_events > 40 and r < 0.03:
                return (self.settle() + "; " if self.rng.random() < 0.5 else "") + self.failover()
            r = self.rng.random()
            if r < 0.22:
                return self.produce()
            if r < 0.45:
                return self.fetch(d)
            if r < 0.55:
                return self.run_manager(self.rng.choice(self.clusters()))
            if r < 0.62:
                ms = self.rng.choice([100, 600, 1500, 3000])
                self.clock.advance(ms)
                return f"tick {ms}"
            if r < 0.70:
                return self.network_fault()
            if r < 0.74:
                c, p = self.rng.choice(self.clusters()), self.rng.randrange(PARTITIONS)
                c.leader_change(p)
                return f"leader change {c.name} p{p} -> epoch {c.leader_epochs[p]}"
            if r < 0.79:
                return self.crash(d) if d.alive else self.restart(d)
            if r < 0.83:
                c = self.rng.choice(self.clusters())
                c.store.unavailable = not c.store.unavailable
                return f"coordinator of {c.name} {'unavailable' if c.store.unavailable else 'back'}"
            if r < 0.86:
                d.bumper.fails = not d.bumper.fails
                return f"controller of {d.name} {'unreachable' if d.bumper.fails else 'back'}"
            if r < 0.91:
                return self.pause_or_resume()
            if r < 0.93:
                return self.settle()
            return self.produce()
        if self.phase in (FAILING_OVER, FAILED_OVER):
            if self.phase == FAILED_OVER and self.phase_events > 15 and r < 0.08:
                self.heal()
                return self.failback()
            r = self.rng.random()
            if r < 0.45:
                return self.produce()
            if r < 0.60:
                return self.run_manager(d)
            if r < 0.70:
                c, p = self.rng.choice(self.clusters()), self.rng.randrange(PARTITIONS)
                c.leader_change(p)
                return f"leader change {c.name} p{p} -> epoch {c.leader_epochs[p]}"
            if r < 0.76:
                ms = self.rng.choice([100, 1500])
                self.clock.advance(ms)
                return f"tick {ms}"
            if r < 0.82:
                c = self.rng.choice(self.clusters())
                return self.crash(c) if c.alive else self.restart(c)
            if r < 0.88:
                dead = [c for c in self.clusters() if not c.alive]
                if dead:
                    return self.restart(dead[0])
                return self.network_fault()
            if r < 0.92:
                d.store.unavailable = not d.store.unavailable
                return f"coordinator of {d.name} {'unavailable' if d.store.unavailable else 'back'}"
            return self.produce()
        raise AssertionError(self.phase)

    # -- invariants ----------------------------------------------------------------------

    def check(self) -> None:
        for c in self.clusters():
            store = c.store
            fresh = store.changes[self.seen_changes[c.name]:]
            self.seen_changes[c.name] = len(store.changes)
            self.violations += inv.legal_changes(c.name, fresh, store.refused)
            if self.phase == SOURCE_DELETED and c is self.dst:
                self.violations += [f"{c.name}: {ch.key} went {ch.old.name} -> {ch.new.name} after its source "
                                    f"topic was deleted" for ch in fresh if ch.key.topic_id == self.deleted_topic_id
                                    and ch.new is S.PREPARING]
            store.refused.clear()
            for p in range(PARTITIONS):
                key = (c.name, p)
                epoch = c.leader_epochs[p]
                if epoch < self.max_epochs.get(key, -1):
                    self.violations.append(f"{c.name} p{p}: leader epoch went back to {epoch}")
                self.max_epochs[key] = max(epoch, self.max_epochs.get(key, -1))
                if not c.alive:
                    continue
                part = c.rm.get_partition(TopicPartition(TOPIC, p))
                if part is None:
                    if c.topic_present:
                        self.violations.append(f"{c.name} p{p}: the image hosts it, the broker does not")
                    continue
                if part.leader_epoch != epoch:
                    self.violations.append(f"{c.name} p{p}: partition runs epoch {part.leader_epoch}, "
                                           f"the controller's is {epoch}")
                batches = inv.stored_batches(c.rm, TopicPartition(TOPIC, p))
                self.violations += inv.epochs_monotone(f"{c.name} p{p}", part, batches)
        for p in range(PARTITIONS):
            self._check_partition(p)
        self.check_transactions()

    def _check_partition(self, p: int) -> None:
        tp = TopicPartition(TOPIC, p)
        d, s = self.dst, self.src
        if self.phase == SOURCE_DELETED:
            self._check_source_deleted(p)
        if self.phase == MIRRORING and d.alive and s.alive and d.state(p) in ATTACHED_STATES:
            src_batches = inv.stored_batches(s.rm, tp)
            hw = s.rm.get_partition(tp).log.high_watermark
            self.violations += inv.mirrored_prefix(f"{d.name} p{p}", inv.stored_batches(d.rm, tp), src_batches, hw,
                                                   self.preexisting[p])
        if self.phase == FAILING_OVER and d.alive and p not in self.cut_done and not d.read_only(p):
            self._failover_cut(p)
        if self.phase == FAILING_OVER and len(self.cut_done) == PARTITIONS:
            self.phase = FAILED_OVER
        primary = self.primary[p]
        if primary.alive and primary.topic_present:
            values = inv.record_values(inv.stored_batches(primary.rm, tp))
            for offset, value in self.acked[p].items():
                if values.get(offset) != value:
                    self.violations.append(f"{primary.name} p{p}: acknowledged record at {offset} lost or changed")
                    break


    def run(self, events: int) -> Coverage:
        try:
            for i in range(events):
                line = self.step()
                self.trace.append(f"{i}: [{self.phase}] {line}")
                self.check()
                if self.violations:
                    raise SimulationFailure(self.report(i), self.violations)
                txn_line = self.transaction_event()
                if txn_line is not None:
                    self.trace.append(f"{i}: [{self.phase}] txn: {txn_line}")
                    self.check()
                    if self.violations:
                        raise SimulationFailure(self.report(i), self.violations)
            if self.phase == SOURCE_DELETED:
                self.trace.append(f"end: {self.readd_after_deletion()}")
                self.check()
            if self.phase == MIRRORING:
                self.trace.append(f"end: {self.settle()}")
                self.check()
                if self.violations:
                    raise SimulationFailure(self.report(events), self.violations)
        finally:
            for task in self.tasks.values():
                task.cancel()
            self.net.deliver()
            self._spin()
            self.loop.close()
        return self.coverage

    def report(self, i: int) -> str:
        lines = [f"mirror simulation seed {self.seed} failed after event {i} "
                 f"(replay: KMIRROR_SIM_SEED={self.seed}):"]
        lines += [f"  {v}" for v in self.violations]
        lines += ["state:"] + [f"  {self.describe(c)}" for c in self.clusters()]
        lines += ["trace (last 40 events):"] + [f"  {t}" for t in self.trace[-40:]]
        return "\n".join(lines)


def run_seed(seed: int, events: int, source_topic_deletion_after: int | None = None) -> Any:
    return MirrorSimulation(seed, source_topic_deletion_after).run(events)

