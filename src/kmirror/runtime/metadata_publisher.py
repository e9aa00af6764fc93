"""Publishing metadata images to the node's broker components without stalling the event loop.

Every image goes to one publish step (replica manager, replication, coordinators, mirror data
plane), in order. When an image adds more than `threshold` partitions hosted here that have
no log yet (a large CreateTopics or CreatePartitions), their logs are first created in
bounded steps (`kmirror.replication.log_preparation`; a step takes as long as the loop spent on
everything else since the last one, 5-50 ms), and the image is published once they exist, so every connection
keeps being served meanwhile. The creation stays on the loop: on a worker thread, each of a
log's dozen file-system calls gives up the interpreter lock and waits for it again behind a
loop busy answering clients, and 10,000 logs took 80-107 s instead of 3-6 s alone. That image is then published in bounded
steps (`ReplicaManager.apply_image_steps`), yielding to the event loop between them, since
building ten thousand partitions' state at once is itself a stall of a second or so on a
loaded machine. Images arriving meanwhile are
coalesced (each image is complete; the newest is published next). Until publication the
broker answers for the new partitions as for any it does not host yet, as Kafka's brokers
apply metadata after the controller has answered.

Nothing else creates or deletes logs while a preparation runs: `apply_image` is the only
other writer and it only runs from `_publish`.

New logs are created without an fsync per file (`PartitionMetadataFile`): after each
publication their topic ids and directories are made durable on a worker thread
(`LogManager.flush_new_logs`), one flush at a time, as Kafka schedules its
`flush-metadata-file` task.

The interpreter's full (generation-2) garbage collections hold every thread for a scan of
the whole heap, and a creation that grows the heap by ten thousand partitions' objects
triggers several of them: hundreds of ms each on a loaded machine. So a large creation first
freezes the heap it starts from (`gc.freeze`: later collections skip it), and freezes again
once published (the new partitions' objects live as long as the partitions). The trade-off,
as for any `gc.freeze`: an object frozen then that later dies inside a reference cycle is not
reclaimed; objects freed by reference counting (most, partitions included) are.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable, Iterator

from kmirror.broker.txn_markers import CONSUMER_OFFSETS
from kmirror.config.mirror import MIRROR_STATE_TOPIC
from kmirror.coordinator.group.service import GroupCoordinatorService
from kmirror.coordinator.transaction.config import TRANSACTION_STATE_TOPIC
from kmirror.coordinator.transaction.service import TransactionCoordinatorService
from kmirror.metadata.image import MetadataImage
from kmirror.mirror.service import MirrorCoordinatorService
from kmirror.mirror.wiring import MirrorDataPlane
from kmirror.replication.log_preparation import UnpreparedPartition, prepare_logs, unprepared_partitions
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.replication.service import ReplicationService

log = logging.getLogger(__name__)

LARGE_CREATION_PARTITIONS = 16
# how long a step of log creation holds the loop: at least PREPARATION_STEP_S, and as long as
# the loop took for everything else since the last step (a fair half of a busy loop), at most
# MAX_PREPARATION_STEP_S
PREPARATION_STEP_S = 0.005
MAX_PREPARATION_STEP_S = 0.05


PublishSteps = Callable[[MetadataImage | None, MetadataImage], Iterator[None]]


class BrokerPublishSteps:
    """The broker components an image is published to, in order: the replica manager (in
    bounded steps), replication, the group, transaction and mirror coordinators (the
    partitions of their state topics this node leads), the mirror data plane."""

    def __init__(self, replica_manager: ReplicaManager, groups: GroupCoordinatorService,
                 transactions: TransactionCoordinatorService, mirrors: MirrorCoordinatorService,
                 mirror_data_plane: MirrorDataPlane) -> None:
        self.replica_manager = replica_manager
        self.groups = groups
        self.transactions = transactions
        self.mirrors = mirrors
        self.mirror_data_plane = mirror_data_plane
        # set once the node starts replication, after the first image is published
        self.replication: ReplicationService | None = None
        # set once the broker serves: tells the controller where new replicas' logs are (KIP-858)
        self.on_published: Callable[[MetadataImage], None] | None = None

    def __call__(self, old_image: MetadataImage | None, new_image: MetadataImage) -> Iterator[None]:
        rm = self.replica_manager
        yield from rm.apply_image_steps(old_image, new_image)
        yield
        if self.replication is not None:
            self.replication.on_metadata_change(old_image, new_image)
            yield
        self.groups.on_partitions_led(rm.leader_partitions(CONSUMER_OFFSETS))
        self.groups.on_topics_deleted(new_image.topics_deleted_since(old_image))
        self.transactions.on_partitions_led(rm.leader_partitions(TRANSACTION_STATE_TOPIC))
        self.mirrors.on_partitions_led(rm.leader_partitions(MIRROR_STATE_TOPIC))
        yield
        self.mirror_data_plane.on_metadata_change(new_image)
        if self.on_published is not None:
            self.on_published(new_image)


class MetadataPublisher:
    def __init__(self, replica_manager: ReplicaManager, publish_steps: PublishSteps,
                 threshold: int = LARGE_CREATION_PARTITIONS) -> None:
        self._replica_manager = replica_manager
        self._publish_steps = publish_steps
        self._threshold = threshold
        self._published: MetadataImage | None = None
        self._latest: MetadataImage | None = None  # set by `on_change` before a preparation starts
        self._task: asyncio.Task[None] | None = None
        self._flush: asyncio.Task[None] | None = None
        self._stopping = False

    def on_change(self, old_image: MetadataImage | None, new_image: MetadataImage) -> None:
        """The metadata listener."""
        del old_image
        self._latest = new_image
        if self._task is not None:
            return  # the running preparation publishes the newest image when done
        if len(self._unprepared(new_image, limit=self._threshold + 1)) <= self._threshold:
            for _ in self._publish(new_image):
                pass
            return
        self._task = asyncio.get_running_loop().create_task(self._prepare_and_publish())

    async def wait_published(self) -> None:
        """Until the newest image is published (a running preparation done)."""
        while self._task is not None:
            await asyncio.shield(self._task)

    async def stop(self) -> None:
        """Stop a running preparation at its next log (its image is not published) and wait
        for a running flush of new logs, which stops at its next log too."""
        self._stopping = True
        if self._task is not None:
            await asyncio.shield(self._task)
        if self._flush is not None:
            await asyncio.shield(self._flush)

    def _unprepared(self, image: MetadataImage, limit: int | None = None) -> list[UnpreparedPartition]:
        """Partitions without a log among the topics changed since the published image."""
        rm = self._replica_manager
        return unprepared_partitions(image, rm.node_id, rm.log_manager, since=self._published, limit=limit)

    async def _prepare_and_publish(self) -> None:
        gc.freeze()
        try:
            while True:  # until no newer image arrived while preparing or publishing
                await self._prepare_latest()
                if self._stopping:
                    return
                started = time.monotonic()
                image = self._newest()
                for _ in self._publish(image):
                    await asyncio.sleep(0)  # other connections are served between steps
                log.info("published metadata offset %s in %.3f s", image.offset, time.monotonic() - started)
                if self._latest is image:
                    break
        finally:
            self._task = None
            gc.freeze()

    async def _prepare_latest(self) -> None:
        while True:  # until no newer image arrived while preparing
            image = self._newest()
            started = time.monotonic()
            missing = self._unprepared(image)
            try:
                step_ends = time.monotonic() + PREPARATION_STEP_S
                for _ in prepare_logs(self._replica_manager, image, missing):
                    if self._stopping:
                        return
                    if time.monotonic() >= step_ends:
                        step_ends = await _turn()
            except OSError as exc:  # publishing retries and reports the disk error
                log.error("creating partition logs failed: %s", exc)
                return
            except Exception:  # a bug must not leave the image unpublished
                log.exception("creating partition logs failed")
                return
            if missing:
                log.info("created %d partition logs in %.1f s", len(missing), time.monotonic() - started)
            if image is self._latest:
                return

    def _newest(self) -> MetadataImage:
        assert self._latest is not None, "a preparation runs after on_change"
        return self._latest

    def _publish(self, image: MetadataImage) -> Iterator[None]:
        old, self._published = self._published, image
        yield from self._publish_steps(old, image)
        self._flush_new_logs()

    def _flush_new_logs(self) -> None:
        if self._flush is None and self._replica_manager.log_manager.has_new_logs and not self._stopping:
            self._flush = asyncio.get_running_loop().create_task(self._flush_in_background())

    async def _flush_in_background(self) -> None:
        log_manager = self._replica_manager.log_manager
        try:
            while log_manager.has_new_logs and not self._stopping:  # `close` syncs the rest
                started = time.monotonic()
                flushed = await asyncio.to_thread(log_manager.flush_new_logs, lambda: self._stopping)
                if flushed > LARGE_CREATION_PARTITIONS:
                    log.info("made %d new partition logs durable in %.1f s", flushed, time.monotonic() - started)
        except OSError as exc:  # Log.flush retries it before any data is made durable
            log.error("making new partition logs durable failed: %s", exc)
        finally:
            self._flush = None


async def _turn() -> float:
    """Let the loop serve everything else once; the end of the next creation step."""
    yielded = time.monotonic()
    await asyncio.sleep(0)
    now = time.monotonic()
    return now + min(max(PREPARATION_STEP_S, now - yielded), MAX_PREPARATION_STEP_S)
