"""A MirrorManager on a destination broker mirroring an in-process source broker, for the
partition lifecycle tests (tests/unit/mirror/test_manager*.py): no sockets, manual clocks."""

from __future__ import annotations

from uuid import UUID

from kmirror.metadata.image import MetadataImage, PartitionRegistration
from kmirror.mirror.fetcher.local_replica import MirrorLocalReplica
from kmirror.mirror.fetcher.manager import MirrorFetcherManager
from kmirror.mirror.fetcher.policy import mirror_fetch_policy
from kmirror.mirror.lifecycle_ports import InMemoryMirrorStateStore
from kmirror.mirror.manager import MirrorManager
from kmirror.ports import ManualClock
from kmirror.records.builder import build_batch
from kmirror.testing.mirror_fetcher import InProcessSourceCluster
from kmirror.testing.replication import image_with
from kmirror.testing.replication_harness import Broker, log_batches
from kmirror.types import TopicPartition

TOPIC_ID = UUID(int=0xBEEF)
TP = TopicPartition("t", 0)


def image(broker_id: int, epoch: int, mirror_name: str | None) -> MetadataImage:
    """Topic "t", one partition led by `broker_id` in `epoch`, member of `mirror_name`."""
    regs = {0: PartitionRegistration((broker_id,), (broker_id,), broker_id, epoch, epoch)}
    configs = {"t": {"mirror.name": mirror_name}} if mirror_name else {}
    return image_with({"t": (TOPIC_ID, regs)}, configs=configs)


def batches(b: Broker) -> list[tuple[int, int, bytes]]:
    return log_batches(b, TP)


class Bumper:
    """The controller's answer to BumpLeaderEpochs, as the next image: leader epoch bumped,
    producer ids fenced below `min_producer_id`."""

    def __init__(self, dest: Broker, mirror: str) -> None:
        self.dest, self.mirror = dest, mirror
        self.calls: list[int] = []
        self.producer_calls: list[int] = []
        self.floor = 0
        self.fence_arrives = True

    async def bump(self, tp: TopicPartition, topic_id: UUID, min_leader_epoch: int, min_producer_id: int) -> None:
        self.calls.append(min_leader_epoch)
        self.producer_calls.append(min_producer_id)
        partition = self.dest.rm.get_partition(tp)
        assert partition is not None
        epoch = max(partition.leader_epoch + 1, min_leader_epoch)
        bumped = image(self.dest.broker_id, epoch, self.mirror + ".removed")
        self.dest.rm.apply_image(None, bumped)
        if self.fence_arrives:
            self.floor = max(self.floor, min_producer_id)

    def producer_id_floor(self) -> int:
        return self.floor


def setup(src_epoch: int = 3, producer_ids: tuple[int, ...] = (-1, -1, -1)) -> tuple[
        Broker, Broker, InProcessSourceCluster, MirrorFetcherManager, InMemoryMirrorStateStore, Bumper, MirrorManager]:
    """A source broker holding three batches (codecs none, lz4, zstd; idempotent where
    `producer_ids` has an id) of "t"-0 in `src_epoch`, and a destination broker whose
    MirrorManager mirrors it as mirror "m"."""
    src = Broker(1, ManualClock(), 30_000)
    src.rm.apply_image(None, image(1, src_epoch, None))
    for codec, pid in zip((0, 3, 4), producer_ids, strict=True):
        src.rm.append_records({TP: build_batch([(b"k", b"v" * 50, (("h", b"x"),), 1)] * 3, compression=codec,
                                               producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                                               base_sequence=0 if pid >= 0 else -1)}, 1)
    dst = Broker(7, ManualClock(), 30_000)
    dst.rm.apply_image(None, image(7, 0, "m"))
    source = InProcessSourceCluster({1: src.rm}, 1, cluster_id="src-id")
    fetchers = MirrorFetcherManager(7, MirrorLocalReplica(dst.rm), mirror_fetch_policy(), dst.clock)
    store = InMemoryMirrorStateStore()
    bumper = Bumper(dst, "m")
    mgr = MirrorManager(7, dst.rm, fetchers, store, bumper, lambda name: source if name == "m" else None, dst.clock)
    return src, dst, source, fetchers, store, bumper, mgr


async def drain(fetchers: MirrorFetcherManager, rounds: int = 10) -> None:
    for _ in range(rounds):
        for fetcher in list(fetchers.fetchers.values()):
            await fetcher.run_once()
