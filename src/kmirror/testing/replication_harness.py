"""An in-process replicated partition for scenario scripts and simulations (no sockets).

Brokers are real `ReplicaManager`s over the real `LogManager` on the in-memory file system;
each follows the image through its own `FetchEngine` (the same engine the node runs), driven
synchronously against the leader's replica manager. A tiny controller model applies
AlterPartition proposals with the controller's checks (leader epoch, partition epoch), and
`elect` moves leadership (clean from the ISR, or unclean). `crash` drops unflushed bytes.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from uuid import UUID

from kmirror.log.config import LogConfig
from kmirror.log.log_manager import LogManager
from kmirror.metadata.image import MetadataImage, PartitionRegistration
from kmirror.ports import ManualClock
from kmirror.protocol.errors import ErrorCode
from kmirror.records.batch import iter_batches
from kmirror.records.builder import build_batch
from kmirror.records.record import decode_records
from kmirror.replication.fetcher.endpoint import (
    epoch_end_offsets_from_replica_manager,
    fetch_from_replica_manager,
    log_offsets_from_replica_manager,
)
from kmirror.replication.fetcher.engine import FetchedPartition, FetchEngine
from kmirror.replication.fetcher.local_replica import ReplicaManagerLocalReplica
from kmirror.replication.fetcher.policy import FetchPolicy
from kmirror.replication.outcomes import AppendOutcome, PartitionError
from kmirror.replication.partition import PartitionState
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.replication.replica_ports import AlterPartitionOutbox, FollowedPartition
from kmirror.testing.memory_fs import MemoryFileSystem
from kmirror.testing.replication import image_with, server_config
from kmirror.types import TopicPartition

TOPIC_ID = UUID(int=0xA11CE)
TP = TopicPartition("t", 0)
LOG_DIR = "/data/kafka-logs"


class Broker:
    def __init__(self, broker_id: int, clock: ManualClock, lag_ms: int) -> None:
        self.broker_id = broker_id
        self.clock = clock
        self.lag_ms = lag_ms
        self.fs = MemoryFileSystem()
        self.alive = True
        self._boot()

    def _boot(self) -> None:
        self.log_manager = LogManager(self.fs, [LOG_DIR], self.clock, _log_config())
        self.log_manager.load_logs()
        self.outbox = AlterPartitionOutbox()
        config = server_config(self.broker_id, replica_lag_time_max_ms=str(self.lag_ms))
        self.rm = ReplicaManager(self.broker_id, self.log_manager, self.clock, config, alter_partition=self.outbox)
        self.engine = FetchEngine(ReplicaManagerLocalReplica(self.rm), FetchPolicy(replica_id=self.broker_id, backoff_ms=0))
        self.leader_of: dict[TopicPartition, int] = {}
        self.rm.add_role_listener(self._on_role_change)

    def _on_role_change(self, follow: list[FollowedPartition], unfollow: list[TopicPartition]) -> None:
        self.engine.remove_partitions(unfollow)
        for tp in unfollow:
            self.leader_of.pop(tp, None)
        for f in follow:
            self.engine.add_partition(f.topic_partition, f.topic_id, f.leader_epoch)
            self.leader_of[f.topic_partition] = f.leader_id

    def flush(self) -> None:
        for log in self.log_manager.all_logs():
            log.flush()

    def crash(self) -> None:
        """Lose every unflushed byte and the process state; `restart` recovers from disk."""
        self.fs.crash()
        self.alive = False

    def restart(self, image: MetadataImage) -> None:
        self._boot()
        self.alive = True
        self.rm.apply_image(None, image)

    @property
    def partition(self) -> Any:
        return self.rm.get_partition(TP)


class ReplicationHarness:
    def __init__(
        self, brokers: tuple[int, ...] = (1, 2, 3), min_isr: int = 1, lag_ms: int = 30_000, unclean: bool = False
    ) -> None:
        self.clock = ManualClock()
        self.brokers = {b: Broker(b, self.clock, lag_ms) for b in brokers}
        self.min_isr = min_isr
        self.unclean = unclean
        self.registration = PartitionRegistration(tuple(brokers), tuple(brokers), brokers[0], 0, 0)
        self.acked: dict[int, bytes] = {}  # offset -> value of every acks=all-acknowledged record
        self.events: list[str] = []
        self._next_value = 0
        self._publish()

    # -- metadata / controller model ----------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        return image_with({"t": (TOPIC_ID, {0: self.registration})}, configs={"t": {"min.insync.replicas": str(self.min_isr)}})

    def _publish(self) -> None:
        image = self.image
        for b in self.brokers.values():
            if b.alive:
                b.rm.apply_image(None, image)

    def controller(self) -> list[str]:
        """Apply every pending AlterPartition like the controller (KIP-497 checks)."""
        out: list[str] = []
        for b in self.brokers.values():
            for item in b.outbox.drain() if b.alive else []:
                reg = self.registration
                if reg.leader != b.broker_id or item.leader_epoch != reg.leader_epoch:
                    error = ErrorCode.fenced_leader_epoch
                elif item.partition_epoch != reg.partition_epoch:
                    error = ErrorCode.invalid_update_version
                else:
                    error = ErrorCode.none
                    self.registration = dataclasses.replace(reg, isr=item.new_isr, partition_epoch=reg.partition_epoch + 1)
                reg = self.registration
                committed = PartitionState(reg.leader, reg.leader_epoch, reg.partition_epoch, reg.replicas, reg.isr)
                b.rm.handle_alter_partition_response(item, error, committed if error == ErrorCode.none else None)
                out.append(f"alter-partition from {b.broker_id} isr={list(item.new_isr)}: {error.name}")
        self._publish()
        return out

    def elect(self, leader: int, unclean: bool = False) -> str:
        reg = self.registration
        if leader not in reg.isr and not (unclean and (self.unclean or unclean)):
            return f"elect {leader}: not in ISR {list(reg.isr)}"
        isr = reg.isr if leader in reg.isr else (leader,)
        self.registration = PartitionRegistration(reg.replicas, isr, leader, reg.leader_epoch + 1, reg.partition_epoch + 1)
        self._publish()
        return f"leader {leader} epoch {self.registration.leader_epoch}"

    def fence(self, broker: int) -> str:
        """The controller removes a dead broker from the ISR (and from leadership: clean election)."""
        reg = self.registration
        isr = tuple(r for r in reg.isr if r != broker) or reg.isr
        leader = reg.leader
        epoch = reg.leader_epoch
        if leader == broker:
            candidates = [r for r in isr if r != broker and self.brokers[r].alive]
            leader = candidates[0] if candidates else -1
            epoch += 1
        self.registration = PartitionRegistration(reg.replicas, isr, leader, epoch, reg.partition_epoch + 1)
        self._publish()
        return f"leader {leader} epoch {epoch} isr {list(isr)}"

    def restart(self, broker: int) -> str:
        """Restart a crashed broker; an offline partition gets it as leader if it is in the
        ISR (the controller's clean election when an ISR member is unfenced)."""
        self.brokers[broker].restart(self.image)
        reg = self.registration
        if reg.leader == -1 and broker in reg.isr:
            self.registration = PartitionRegistration(reg.replicas, reg.isr, broker, reg.leader_epoch + 1, reg.partition_epoch + 1)
            self._publish()
            return f"leader {broker} epoch {self.registration.leader_epoch}"
        return "ok"

    # -- data plane ---------------------------------------------------------------------

    def produce(self, n: int, acks: int) -> str:
        leader = self.brokers.get(self.registration.leader)
        if leader is None or not leader.alive:
            return "produce: no leader"
        values = [b"v%d" % (self._next_value + i) for i in range(n)]
        self._next_value += n
        batch = build_batch([(None, v, (), self.clock.now_ms()) for v in values])
        result = leader.rm.append_records({TP: batch}, acks)[TP]
        if isinstance(result, PartitionError):
            return f"produce: {result.code.name}"
        assert isinstance(result, AppendOutcome)
        if acks == -1:
            self._pending_acks = getattr(self, "_pending_acks", [])
            self._pending_acks.append((leader.broker_id, leader.partition.leader_epoch, result.base_offset, values))
        return f"produce offsets {result.base_offset}..{result.last_offset}"

    def settle_acks(self) -> None:
        """acks=all: a produce is acknowledged once its leader's HW covers it while it leads
        with the epoch it appended in (otherwise the client would see an error)."""
        still = []
        for broker_id, epoch, base, values in getattr(self, "_pending_acks", []):
            p = self.brokers[broker_id].partition if self.brokers[broker_id].alive else None
            if p is None or not p.is_leader or p.leader_epoch != epoch:
                continue
            done, error = p.check_enough_replicas_reach_offset(base + len(values))
            if not done:
                still.append((broker_id, epoch, base, values))
            elif error == ErrorCode.none:
                for i, v in enumerate(values):
                    self.acked[base + i] = v
        self._pending_acks = still

    def fetch(self, broker_id: int) -> str:
        """One fetch round of `broker_id`'s engine against its leader."""
        b = self.brokers[broker_id]
        leader_id = b.leader_of.get(TP)
        if not b.alive or leader_id is None:
            return f"fetch {broker_id}: not following"
        leader = self.brokers[leader_id]
        if not leader.alive:
            b.engine.handle_failure([TP], self.clock.monotonic_ms())
            return f"fetch {broker_id}: leader {leader_id} unreachable"
        fetched = fetch_round(b.engine, leader.rm, self.clock.monotonic_ms())
        if fetched is None:
            return f"fetch {broker_id}: nothing to fetch"
        r = fetched[TP]
        self.settle_acks()
        if r.error != ErrorCode.none:
            return f"fetch {broker_id}: {r.error.name}"
        if r.diverging_epoch is not None:
            return f"fetch {broker_id}: diverging epoch {r.diverging_epoch.leader_epoch} end {r.diverging_epoch.end_offset}"
        return f"fetch {broker_id}: {len(list(iter_batches(bytes(r.records))))} batches hw {r.high_watermark}"

    def shrink(self) -> str:
        leader = self.brokers.get(self.registration.leader)
        if leader is None or not leader.alive:
            return "shrink: no leader"
        items = leader.rm.maybe_shrink_isr()
        return "shrink: " + (", ".join(f"propose isr={list(i.new_isr)}" for i in items) or "nothing")

    def tick(self, ms: int) -> None:
        self.clock.advance(ms)

    # -- observation --------------------------------------------------------------------

    def state_lines(self) -> list[str]:
        reg = self.registration
        lines = [f"controller: leader={reg.leader} epoch={reg.leader_epoch} pe={reg.partition_epoch} isr={list(reg.isr)}"]
        for b in self.brokers.values():
            if not b.alive:
                lines.append(f"broker {b.broker_id}: down")
                continue
            p = b.partition
            log = p.log
            role = "leader" if p.is_leader else "follower"
            epochs = " ".join(f"{e.epoch}@{e.start_offset}" for e in log.epoch_cache.entries)
            line = f"broker {b.broker_id}: {role} epoch={p.leader_epoch} leo={log.log_end_offset} hw={log.high_watermark} epochs=[{epochs}]"
            if p.is_leader:
                line += f" isr={list(p.isr)} maximal={sorted(p.maximal_isr)}"
            lines.append(line)
        return lines

    def records(self, broker_id: int) -> dict[int, bytes]:
        """offset -> value of every record in `broker_id`'s log."""
        log = self.brokers[broker_id].partition.log
        data = log.read(log.log_start_offset, 1 << 30, log.log_end_offset, True)
        out: dict[int, bytes] = {}
        buf = bytes(getattr(data, "records", b""))
        for pos, _header in iter_batches(buf):
            for record in decode_records(buf, pos):
                out[record.offset] = bytes(record.value or b"")
        return out


def log_batches(broker: Broker, tp: TopicPartition) -> list[tuple[int, int, bytes]]:
    """Every batch of `tp`'s log on `broker`: (base offset, partition leader epoch, bytes)."""
    partition = broker.rm.get_partition(tp)
    assert partition is not None
    log = partition.log
    out: list[tuple[int, int, bytes]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:  # one segment per read, as Kafka's
        buf = bytes(getattr(log.read(offset, 1 << 30, log.log_end_offset, True), "records", b""))
        if not buf:
            break
        for pos, h in iter_batches(buf):
            out.append((h.base_offset, h.partition_leader_epoch, buf[pos:pos + h.size]))
            offset = h.next_offset
    return out


def fetch_round(engine: FetchEngine, leader: ReplicaManager, now: int) -> dict[TopicPartition, FetchedPartition] | None:
    """One round of a follower's fetcher against `leader`, in process: its epoch and offset
    queries, then its Fetch (None when it has nothing to fetch), as the fetcher thread runs them."""
    queries = engine.epoch_queries(now)
    if queries:
        engine.handle_epoch_end_offsets(epoch_end_offsets_from_replica_manager(leader, queries), now)
    for q in engine.reset_queries(now):
        offsets = log_offsets_from_replica_manager(leader, q)
        if isinstance(offsets, ErrorCode):
            engine.handle_failure([q.topic_partition], now)
        else:
            engine.handle_leader_offsets(q.topic_partition, *offsets)
    plan = engine.fetch_plan(now)
    if plan is None:
        return None
    results = fetch_from_replica_manager(leader, plan)
    engine.handle_fetch_response(plan, results, now)
    return results


def _log_config() -> Any:
    return LogConfig()
