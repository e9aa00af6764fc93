"""The simulation's shared state and plumbing (`SimulationBase`): clusters A and B, the link
between them, the virtual clock, the event loop the data plane runs on, the coverage counters
and the trace. The phases' events live in `phases` (failover, failback, settle),
`deletion` (source topic deleted / re-created) and `simulation` (the mirroring events, the
step and the invariants)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
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
    transactions_committed: int = 0  # EndTxn(commit) acknowledged
    transactions_aborted: int = 0  # EndTxn(abort) acknowledged
    txn_coordinator_crashes_mid_end_txn: int = 0  # PrepareCommit persisted, markers not all written
    txn_coordinator_moves: int = 0  # unloaded and loaded in another coordinator epoch
    txn_markers_resent_after_load: int = 0  # a loaded coordinator owed markers of a prepared transaction
    extra: dict[str, int] = field(default_factory=dict)



class SimulationBase:
    """The two clusters, the link, the clock and what the run has seen; the plumbing every
    phase's events use (run the data plane, fetch, crash, restart, heal, describe)."""

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
        # transactions draw from their own generator: the mirror's events keep their sequence
        self.txn_rng = random.Random(seed * 1_000_003 + 7)
        self.a = SimCluster("A", 1, self.clock, self.rng, random.Random(self.txn_rng.random()))
        self.b = SimCluster("B", 2, self.clock, self.rng, random.Random(self.txn_rng.random()))
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
        if c.txn.in_flight:
            self.coverage.txn_markers_resent_after_load += 1
        return f"restart {c.name}: " + self.run_manager(c) + f"; {len(c.txn.in_flight)} txn markers owed"

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

    # -- events every phase uses -------------------------------------------------------

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


    def check(self) -> None:
        """The invariants after an event (`MirrorSimulation.check`)."""
        raise NotImplementedError
