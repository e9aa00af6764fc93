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

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from kmirror.kip1279.state import MirrorPartitionState
from kmirror.ports import ManualClock
from kmirror.replication.fetcher.fetcher import Fetcher
from kmirror.testing.sim import invariants as inv
from kmirror.testing.sim.cluster import MIRROR, PARTITIONS, TOPIC, SimCluster
from kmirror.testing.sim.network import Network, SimSourceCluster
from kmirror.types import TopicPartition

S = MirrorPartitionState
MIRRORING, FAILING_OVER, FAILED_OVER = "mirroring", "failing-over", "failed-over"
SOURCE_DELETED = "source-deleted"
GONE_STATES = (S.STOPPED, S.FAILED, S.UNKNOWN)  # where a deleted source topic leaves a partition
ATTACHED_STATES = (S.PREPARING, S.MIRRORING, S.PAUSING, S.PAUSED)


class SimulationFailure(AssertionError):
    def __init__(self, message: str, violations: list[str]) -> None:
        super().__init__(message)
        self.violations = list(violations)


@dataclass
class Coverage:
    failovers: int = 0
    disaster_failovers: int = 0
    failbacks: int = 0
    lme_truncations: int = 0  # a failback cut a divergent tail
    crashes: int = 0
    converged: int = 0
    held_answers: int = 0
    pauses: int = 0
    fresh_producers_after_failover: int = 0
    source_topic_deletions: int = 0
    source_topic_recreations: int = 0  # deleted and at once re-created (another topic id)
    readded_after_deletion: int = 0  # the operator's remove, delete, add back
    extra: dict[str, int] = field(default_factory=dict)


class MirrorSimulation:
    def __init__(self, seed: int, source_topic_deletion_after: int | None = None) -> None:
        """`source_topic_deletion_after`: the "source topic deleted / re-created" event may
        happen once the run has this many events (default: only after the first failback)."""
        self.seed = seed
        self.deletion_after = source_topic_deletion_after
        self.deletion_rate = 0.02 if source_topic_deletion_after is None else 0.25
        self.deleted: dict[int, tuple[list[inv.StoredBatch], set[tuple[int, bytes]]]] = {}
        self.deleted_topic_id: UUID | None = None
        self.rng = random.Random(seed)
        self.clock = ManualClock()
        self.loop = asyncio.new_event_loop()
        self.net = Network(self.rng)
        self.a = SimCluster("A", 1, self.clock, self.rng)
        self.b = SimCluster("B", 2, self.clock, self.rng)
        self.src, self.dst = self.a, self.b
        self.b.mirror_source = SimSourceCluster(self.a, self.net)
        self.b.mirror_name = MIRROR
        self.b.publish()
        self.phase = MIRRORING
        self.phase_events = 0
        self.primary = {p: self.a for p in range(PARTITIONS)}
        self.acked: dict[int, dict[int, bytes]] = {p: {} for p in range(PARTITIONS)}
        self.preexisting: dict[int, set[tuple[int, bytes]]] = {p: set() for p in range(PARTITIONS)}
        self.cut_done: set[int] = set()
        self.tasks: dict[Fetcher, asyncio.Task[bool]] = {}
        self.max_epochs: dict[tuple[str, int], int] = {}
        self.seen_changes = {"A": 0, "B": 0}
        self.trace: list[str] = []
        self.violations: list[str] = []
        self.coverage = Coverage()

    # -- plumbing ------------------------------------------------------------------------

    def clusters(self) -> tuple[SimCluster, SimCluster]:
        return self.a, self.b

    def _spin(self) -> None:
        """Run every task until it ends or waits on a held answer."""
        async def spin() -> None:
            for _ in range(50):
                await asyncio.sleep(0)
        self.loop.run_until_complete(spin())
        for fetcher, task in list(self.tasks.items()):
            if task.done():
                del self.tasks[fetcher]
                if not task.cancelled() and task.exception() is not None:
                    self.violations.append(f"fetch round raised {task.exception()!r}")

    def run_manager(self, c: SimCluster) -> str:
        if not c.alive:
            return f"manager {c.name}: down"
        try:
            self.loop.run_until_complete(c.run_manager())
        except Exception as exc:  # the data plane logs a failed pass and runs again later
            self._spin()
            return f"manager {c.name}: pass failed {exc!r}"
        self._spin()
        states = " ".join(f"p{p}={c.state(p).name}" for p in range(PARTITIONS))
        return f"manager {c.name}: {states}"

    def retry_pending(self, c: SimCluster) -> str:
        """Only the first step of a data plane pass: fetchers re-added from fresh source
        metadata. The manager's own look at the source comes later; the fetchers run in
        between (they are tasks of their own)."""
        if not c.alive:
            return f"retry pending {c.name}: down"
        pending = sorted(str(tp) for tp in c.fetchers.pending)
        try:
            self.loop.run_until_complete(c.fetchers.retry_pending())
        except Exception as exc:
            return f"retry pending {c.name}: failed {exc!r}"
        self._spin()
        return f"retry pending {c.name}: {pending} -> {sorted(str(tp) for tp in c.fetchers.pending)}"

    def fetch(self, c: SimCluster) -> str:
        if not c.alive:
            return f"fetch {c.name}: down"
        started = 0
        for fetcher in list(c.fetchers.fetchers.values()):
            if fetcher not in self.tasks:
                self.tasks[fetcher] = self.loop.create_task(fetcher.run_once())
                started += 1
        self._spin()
        leo = c.log_end_offsets()
        return f"fetch {c.name}: {started} rounds, log end offsets {leo}, {len(self.net.held)} held"

    def crash(self, c: SimCluster) -> str:
        writable = any(c.accepts_writes(p) for p in range(PARTITIONS))
        for fetcher in list(c.fetchers.fetchers.values()):
            task = self.tasks.pop(fetcher, None)
            if task is not None:
                task.cancel()
        c.crash(flush=writable)
        self._spin()
        self.coverage.crashes += 1
        return f"crash {c.name} ({'clean' if writable else 'unflushed bytes lost'})"

    def restart(self, c: SimCluster) -> str:
        c.restart()
        return f"restart {c.name}: " + self.run_manager(c)

    def heal(self) -> None:
        self.net.down, self.net.drop_rate, self.net.delay_rate = False, 0.0, 0.0
        self.net.deliver()
        for c in self.clusters():
            c.store.unavailable = False
            c.bumper.fails = False
            if not c.alive:
                self.restart(c)
        self._spin()

    # -- events --------------------------------------------------------------------------

    def produce(self) -> str:
        c = self.rng.choice(self.clusters())
        if not c.alive:
            return f"produce {c.name}: down"
        p = self.rng.randrange(PARTITIONS)
        producer = self.rng.choice(c.producers)
        if self.rng.random() < 0.1:
            producer.producer_id = -1  # a new producer (InitProducerId)
        line, produced, fresh_refused = c.produce(producer, p)
        if fresh_refused:
            self.violations.append(f"a new producer's first batch was refused: {line}")
        if produced is not None and self.primary[p] is c:
            for i, value in enumerate(produced.values):
                self.acked[p][produced.base_offset + i] = value
            if p in self.cut_done and c is self.dst and producer.sequences.get(p) == len(produced.values):
                self.coverage.fresh_producers_after_failover += 1
        return line

    def network_fault(self) -> str:
        roll = self.rng.random()
        if roll < 0.25:
            self.net.down = not self.net.down
            return f"network {'down' if self.net.down else 'up'}"
        if roll < 0.45:
            self.net.drop_rate = self.rng.choice([0.0, 0.0, 0.2, 0.5])
            return f"network drop rate {self.net.drop_rate}"
        if roll < 0.65:
            self.net.delay_rate = self.rng.choice([0.0, 0.3, 0.7])
            return f"network delay rate {self.net.delay_rate}"
        if roll < 0.85:
            n = self.net.deliver()
            self.coverage.held_answers += n
            self._spin()
            return f"deliver {n} held answers"
        n = self.net.fail_held()
        self._spin()
        return f"time out {n} held answers"

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

    def settle(self) -> str:
        """Heal every fault, resume, and run until the destination holds the source's
        committed log: it must get there."""
        self.heal()
        d, s = self.dst, self.src
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
                return "settle: converged " + " ".join(f"p{p}@{leo}" for p, leo in enumerate(d.log_end_offsets()))
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
        return f"failback: {old.name} mirrors {active.name} as {MIRROR}; " + self.run_manager(old)

    # -- source topic deleted / re-created (KIP "Topic Deletion") ------------------------------

    def _deletion_allowed(self) -> bool:
        """Once per run, while the destination holds mirrored records on every partition."""
        d = self.dst
        if self.coverage.source_topic_deletions or not d.alive or min(d.log_end_offsets()) <= 0:
            return False
        if self.deletion_after is None:
            return self.coverage.failbacks >= 1
        return len(self.trace) >= self.deletion_after

    def delete_source_topic(self) -> str:
        """The source's `t` is deleted, half the time re-created at once with another topic id
        (an explicit CreateTopics or a producer's auto-creation). What the destination holds
        now is flushed (a crash losing unflushed bytes is the disk's doing, not the mirror's)
        and must stay: the destination never removes it on the word of another topic."""
        s, d = self.src, self.dst
        for c in (s, d):
            if not c.alive:
                self.restart(c)
        self.check()  # what the restarts did, before the deletion
        d.broker.flush()
        self.deleted = {}
        for p in range(PARTITIONS):
            tp = TopicPartition(TOPIC, p)
            self.deleted[p] = (inv.stored_batches(d.rm, tp), {(b.base_offset, b.raw) for b in inv.stored_batches(s.rm, tp)})
            self.acked[p] = {}  # the source's records are deleted with the topic
            self.primary[p] = s
        self.deleted_topic_id = d.topic_id
        s.delete_topic()
        line = f"delete {TOPIC} at {s.name}"
        self.coverage.source_topic_deletions += 1
        if self.rng.random() < 0.5:
            self._recreate_source_topic()
            line += f", re-created with topic id {s.topic_id}"
        self.phase, self.phase_events = SOURCE_DELETED, 0
        return line

    def _recreate_source_topic(self) -> None:
        s = self.src
        s.create_topic(UUID(int=self.rng.getrandbits(128)))
        for p in range(PARTITIONS):
            self.max_epochs[(s.name, p)] = 0  # a new topic starts at leader epoch 0
        self.coverage.source_topic_recreations += 1

    def readd_after_deletion(self) -> str:
        """The operator's path to mirror the new source topic: wait until every partition
        stopped (it must, with the faults healed), remove `t` from the mirror, delete it at
        the destination, add it again: a new topic with the source's id, copied from 0."""
        self.heal()
        s, d = self.src, self.dst
        for _ in range(12):
            if all(d.state(p) in GONE_STATES for p in range(PARTITIONS)):
                break
            self.run_manager(d)
            self.clock.advance(1100)
        else:
            self.violations.append(f"{d.name} did not stop after its source topic was deleted: {self.describe(d)}")
            return "re-add: partitions did not stop"
        if not s.topic_present:
            self._recreate_source_topic()
        if d.mirror_name is not None:
            d.mirror_name = MIRROR + ".removed"
            d.publish()
            self.run_manager(d)
        d.delete_topic()
        d.mirror_name = MIRROR
        d.create_topic(s.topic_id)
        self.max_epochs.update({(d.name, p): 0 for p in range(PARTITIONS)})
        self.preexisting = {p: set() for p in range(PARTITIONS)}
        self.deleted = {}
        self.phase, self.phase_events = MIRRORING, 0
        self.coverage.readded_after_deletion += 1
        return f"re-add {TOPIC} to {MIRROR} on {d.name} (topic id {s.topic_id}); " + self.run_manager(d)

    def _step_source_deleted(self) -> str:
        d = self.dst
        if self.phase_events > 25 and self.rng.random() < 0.1:
            return self.readd_after_deletion()
        r = self.rng.random()
        if r < 0.25:
            return self.produce()
        if r < 0.45:
            return self.fetch(d)
        if r < 0.56:
            return self.retry_pending(d)
        if r < 0.62:
            return self.run_manager(d)
        if r < 0.70:
            ms = self.rng.choice([100, 1500, 3000])
            self.clock.advance(ms)
            return f"tick {ms}"
        if r < 0.78:
            return self.network_fault()
        if r < 0.83:
            c, p = self.rng.choice(self.clusters()), self.rng.randrange(PARTITIONS)
            c.leader_change(p)
            return f"leader change {c.name} p{p} -> epoch {c.leader_epochs[p]}"
        if r < 0.88:
            return self.crash(d) if d.alive else self.restart(d)
        if r < 0.92 and not self.src.topic_present:
            self._recreate_source_topic()
            return f"re-create {TOPIC} at {self.src.name} with topic id {self.src.topic_id}"
        if r < 0.96:
            d.store.unavailable = not d.store.unavailable
            return f"coordinator of {d.name} {'unavailable' if d.store.unavailable else 'back'}"
        return self.produce()

    def _check_source_deleted(self, p: int) -> None:
        """Mirrored records are never removed from the destination on the word of another
        topic: the log held at the deletion stays, byte for byte, followed only by late
        answers about the deleted topic (same topic id), then at most the MIRROR_PID_RESET of
        the stop and the destination's own writes after it. No partition starts again
        (PREPARING truncates on the source's word; a resume while the source is unreachable
        may still reach MIRRORING, which copies nothing of another topic)."""
        d = self.dst
        if not d.alive or p not in self.deleted:
            return
        kept, old_source = self.deleted[p]
        now = inv.stored_batches(d.rm, TopicPartition(TOPIC, p))
        name = f"{d.name} p{p}"
        if now[:len(kept)] != kept:
            self.violations.append(f"{name}: mirrored records removed after the source topic was deleted "
                                   f"(held {len(kept)} batches up to {kept[-1].last_offset if kept else -1}, "
                                   f"now {len(now)} up to {now[-1].last_offset if now else -1})")
            return
        for b in now[len(kept):]:
            if b.is_mirror_pid_reset:
                break
            if (b.base_offset, b.raw) not in old_source:
                self.violations.append(f"{name}: batch at {b.base_offset} appended after the source topic was "
                                       f"deleted is not the deleted topic's")
                break

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

    # -- reporting -----------------------------------------------------------------------

    def describe(self, c: SimCluster) -> str:
        if not c.alive:
            return f"{c.name}: down"
        parts = []
        for p in range(PARTITIONS):
            part = c.rm.get_partition(TopicPartition(TOPIC, p))
            if part is None:
                parts.append(f"p{p} no topic")
                continue
            epochs = " ".join(f"{e.epoch}@{e.start_offset}" for e in part.log.epoch_cache.entries)
            parts.append(f"p{p} {c.state(p).name} epoch={part.leader_epoch} leo={part.log.log_end_offset} "
                         f"hw={part.log.high_watermark} epochs=[{epochs}]")
        return f"{c.name} mirror.name={c.mirror_name}: " + "; ".join(parts)

    def trace_tail_hint(self) -> str:
        return f"after event {len(self.trace)}"

    def run(self, events: int) -> Coverage:
        try:
            for i in range(events):
                line = self.step()
                self.trace.append(f"{i}: [{self.phase}] {line}")
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
