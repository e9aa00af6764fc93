"""One simulated cluster: a single broker (the real `ReplicaManager` over the real `Log` on the
in-memory file system), a controller model for its image (leader epochs, BumpLeaderEpochs,
topic configs), its mirror state store, its `MirrorManager` + mirror fetchers, and its
idempotent producers.

Topic `t` has the same topic id on both clusters (a mirror topic keeps the source's id).
Mirror `m` is configured on a cluster by giving it a `SimSourceCluster` towards the other one.
Each cluster also runs a transaction coordinator over `__transaction_state-0` and one
transactional producer (`kmirror.testing.sim.transactions`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from kmirror.kip1279.failover import bumped_leader_epoch
from kmirror.kip1279.membership import MIRROR_NAME_CONFIG, is_read_only, parse_mirror_name_config
from kmirror.kip1279.state import MirrorPartitionState
from kmirror.metadata.image import MetadataImage, PartitionRegistration
from kmirror.mirror.coordinator.records import MirrorPartitionKey
from kmirror.mirror.fetcher.local_replica import MirrorLocalReplica
from kmirror.mirror.fetcher.manager import MirrorFetcherManager
from kmirror.mirror.fetcher.policy import mirror_fetch_policy
from kmirror.mirror.manager import MirrorManager
from kmirror.ports import ManualClock
from kmirror.records.builder import build_batch
from kmirror.replication.outcomes import AppendOutcome, PartitionError
from kmirror.testing.replication import image_with
from kmirror.testing.replication_harness import Broker
from kmirror.testing.sim.network import SimSourceCluster
from kmirror.testing.sim.state_store import SimStateStore
from kmirror.testing.sim.transactions import TXN_STATE, SimTransactions
from kmirror.types import TopicPartition

TOPIC = "t"
TOPIC_ID = UUID(int=0x5EED)
PARTITIONS = 2
MIRROR = "m"
CODECS = (0, 1, 2, 3, 4)  # none, gzip, snappy, lz4, zstd
TOPIC_PARTITIONS = tuple(TopicPartition(TOPIC, p) for p in range(PARTITIONS))
TXN_STATE_TOPIC_ID = UUID(int=0x7E57)


def state_key(partition: int, topic_id: UUID = TOPIC_ID) -> MirrorPartitionKey:
    return MirrorPartitionKey(MIRROR, topic_id, partition)


@dataclass
class Producer:
    """An idempotent producer: a producer id from InitProducerId, epoch 0, a sequence per
    partition. Any refused batch makes it start over with a new producer id."""

    producer_id: int = -1
    sequences: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Produced:
    """An acknowledged batch: records at offsets base_offset.. with these values."""

    tp: TopicPartition
    base_offset: int
    values: tuple[bytes, ...]


class ControllerBumper:
    """BumpLeaderEpochs against this cluster's controller model; `fails` models an
    unreachable controller (the step stays pending, as `ControllerEpochBumper` logs)."""

    def __init__(self, cluster: SimCluster) -> None:
        self.cluster = cluster
        self.fails = False

    async def bump(self, tp: TopicPartition, topic_id: UUID, min_leader_epoch: int, min_producer_id: int = -1) -> None:
        if self.fails:
            return
        current = self.cluster.leader_epochs[tp.partition]
        self.cluster.leader_epochs[tp.partition] = bumped_leader_epoch(current, min_leader_epoch)
        if min_producer_id > self.cluster.producer_id_floor:  # the controller's producer id fence
            self.cluster.producer_id_floor = max(self.cluster.next_producer_id, min_producer_id)
            self.cluster.next_producer_id = self.cluster.producer_id_floor
        self.cluster.publish()

    def producer_id_floor(self) -> int:
        return self.cluster.producer_id_floor


class SimCluster:
    def __init__(self, name: str, broker_id: int, clock: ManualClock, rng: random.Random,
                 txn_rng: random.Random | None = None) -> None:
        self.name = name
        self.broker_id = broker_id
        self.clock = clock
        self.rng = rng
        self.cluster_id = f"cluster-{name}"
        self.leader_epochs = {p: 0 for p in range(PARTITIONS)}
        self.topic_id = TOPIC_ID  # topic t's id (deleted and re-created: another one)
        self.topic_present = True
        self.mirror_name: str | None = None  # topic t's `mirror.name` config
        self.mirror_source: SimSourceCluster | None = None  # mirror m's source (None: no mirror m)
        self.store = SimStateStore(TOPIC)
        self.bumper = ControllerBumper(self)
        self.broker = Broker(broker_id, clock, 30_000)
        self.producers = [Producer() for _ in range(3)]
        self.next_producer_id = 0  # both clusters allocate from 0: ids collide across clusters
        self.producer_id_floor = 0  # until a failover fences the mirrored ids
        self.txn_state_epoch = 0  # __transaction_state-0's leader epoch: the coordinator epoch
        self._values = 0
        self._boot_mirror()
        self.publish()
        self.txn = SimTransactions(self, txn_rng or random.Random(name), TOPIC, PARTITIONS)
        self.txn.boot()

    # -- metadata ----------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return self.broker.alive

    @property
    def rm(self) -> Any:
        return self.broker.rm

    def image(self) -> MetadataImage:
        regs = {p: PartitionRegistration((self.broker_id,), (self.broker_id,), self.broker_id, epoch, epoch)
                for p, epoch in self.leader_epochs.items()}
        configs: dict[str, str] = {"segment.bytes": "4096"}
        if self.mirror_name is not None:
            configs[MIRROR_NAME_CONFIG] = self.mirror_name
        topics = {TOPIC: (self.topic_id, regs)} if self.topic_present else {}
        epoch = self.txn_state_epoch
        topics[TXN_STATE.topic] = (TXN_STATE_TOPIC_ID, {0: PartitionRegistration(
            (self.broker_id,), (self.broker_id,), self.broker_id, epoch, epoch)})
        return image_with(topics, configs={TOPIC: configs} if self.topic_present else {})

    def publish(self) -> None:
        if self.alive:
            self.rm.apply_image(None, self.image())

    def delete_topic(self) -> None:
        """DeleteTopics of `t`: its partitions and logs are gone."""
        self.topic_present = False
        self.publish()

    def create_topic(self, topic_id: UUID) -> None:
        """CreateTopics of `t` (again): another topic id, empty logs, leader epoch 0, and the
        producers start over (their sequences belonged to the old partitions)."""
        self.topic_id, self.topic_present = topic_id, True
        self.leader_epochs = {p: 0 for p in range(PARTITIONS)}
        for producer in self.producers:
            producer.producer_id = -1
        self.publish()

    def allocate_producer_id(self) -> int:
        """InitProducerId's id block from the controller (above the failover fence)."""
        self.next_producer_id += 1
        return self.next_producer_id - 1

    def log_end_offsets(self) -> list[int]:
        parts = [self.rm.get_partition(tp) for tp in TOPIC_PARTITIONS]
        return [-1 if p is None else p.log.log_end_offset for p in parts]

    def leader_change(self, partition: int) -> None:
        """A new leader epoch (a leader election; RF=1, so the same broker leads again)."""
        self.leader_epochs[partition] += 1
        self.publish()

    # -- mirror ------------------------------------------------------------------------

    def _boot_mirror(self) -> None:
        self.fetchers = MirrorFetcherManager(self.broker_id, MirrorLocalReplica(self.rm), mirror_fetch_policy(),
                                             self.clock)
        self.manager = MirrorManager(self.broker_id, self.rm, self.fetchers, self.store, self.bumper,
                                     lambda name: self.mirror_source if name == MIRROR else None, self.clock)

    async def run_manager(self) -> None:
        """One pass of the mirror data plane (`MirrorDataPlane.run_once`)."""
        await self.fetchers.retry_pending()
        await self.manager.on_metadata_change(self.image())

    def state(self, partition: int) -> MirrorPartitionState:
        return self.store.current(state_key(partition, self.topic_id))

    def read_only(self, partition: int) -> bool:
        """Produce is refused (`topic_partition_write_refusal`; an unreachable
        coordinator leaves an attached topic read-only)."""
        state = None if self.store.unavailable else self.state(partition)
        return is_read_only(parse_mirror_name_config(self.mirror_name), state,
                            source_topic_deleted=self._source_topic_deleted(partition))

    def _source_topic_deleted(self, partition: int) -> bool:
        return self.alive and self.manager.source_topic_deleted(MIRROR, self.topic_id, partition)

    def accepts_writes(self, partition: int) -> bool:
        """Whether the partition is the active side's, by the persisted state (what the
        Produce path answers once the coordinator is reachable)."""
        return not is_read_only(parse_mirror_name_config(self.mirror_name), self.state(partition),
                                source_topic_deleted=self._source_topic_deleted(partition))

    def describe_last_mirrored_epoch(self, mirror_name: str, tp: TopicPartition) -> int:
        """DescribeMirrors as the source answers it: the stored LME of a topic attached to
        `mirror_name` (removed included), at least the manager's; -1 otherwise."""
        membership = parse_mirror_name_config(self.mirror_name)
        if membership is None or membership.mirror_name != mirror_name:
            return -1
        if self.store.unavailable:
            raise ConnectionError("DescribeMirrors: COORDINATOR_NOT_AVAILABLE")
        lme = self.store.last_mirrored_epoch(state_key(tp.partition, self.topic_id))
        mp = self.manager.partitions.get(tp)
        return max(lme, -1 if mp is None else mp.last_mirrored_epoch)

    # -- crash -------------------------------------------------------------------------

    def crash(self, flush: bool) -> None:
        """The broker dies; unflushed bytes are lost unless `flush` (a clean shutdown)."""
        if flush:
            self.broker.flush()
        self.broker.crash()
        self.store.crash()
        self.txn.crash()

    def restart(self) -> None:
        self.broker.restart(self.image())
        self._boot_mirror()
        self.txn.boot()

    # -- produce -----------------------------------------------------------------------

    def produce(self, producer: Producer, partition: int) -> tuple[str, Produced | None, bool]:
        """(trace line, acknowledged batch, whether a fresh producer's first batch was refused)."""
        tp = TopicPartition(TOPIC, partition)
        if not self.topic_present:
            return f"produce {self.name} p{partition}: UNKNOWN_TOPIC_OR_PARTITION", None, False
        if self.read_only(partition):
            return f"produce {self.name} p{partition}: READ_ONLY_TOPIC", None, False
        if producer.producer_id < 0:
            producer.producer_id, producer.sequences = self.allocate_producer_id(), {}
        seq = producer.sequences.get(partition, 0)
        n = self.rng.randint(1, 4)
        values = tuple(b"%s-%d" % (self.name.encode(), self._values + i) + b"." * self.rng.randint(0, 200)
                       for i in range(n))
        self._values += n
        codec = self.rng.choice(CODECS)
        batch = build_batch([(b"k%d" % i, v, (("h", b"x"),), self.clock.now_ms())
                             for i, v in enumerate(values)], compression=codec, producer_id=producer.producer_id,
                            producer_epoch=0, base_sequence=seq)
        result = self.rm.append_records({tp: batch}, 1)[tp]
        line = f"produce {self.name} p{partition} pid={producer.producer_id} seq={seq} n={n} codec={codec}"
        if isinstance(result, PartitionError):
            fresh = seq == 0
            producer.producer_id = -1
            return f"{line}: {result.code.name}", None, fresh
        assert isinstance(result, AppendOutcome)
        producer.sequences[partition] = seq + n
        acked = self.rm.get_partition(tp).log.high_watermark > result.last_offset
        produced = Produced(tp, result.base_offset, values) if acked and not result.duplicate else None
        return f"{line}: offsets {result.base_offset}..{result.last_offset}", produced, False
