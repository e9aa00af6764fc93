"""Publishing metadata images to the node's broker components without stalling the event loop.

Every image goes to one publish step (replica manager, replication, coordinators, mirror data
plane), in order. When an image adds more than `threshold` partitions hosted here that have
no log yet (a large CreateTopics or CreatePartitions), their logs are first created on a
worker thread (`kmirror.replication.log_preparation`), and the image is published once they
exist: the seconds of fsync'd file creation of a 10,000-partition topic then never run on the
event loop, and every connection keeps being served. That image is then published in bounded
steps (`ReplicaManager.apply_image_steps`), yielding to the event loop between them, since
building ten thousand partitions' state at once is itself a stall of a second or so on a
loaded machine. Images arriving meanwhile are
coalesced (each image is complete; the newest is published next). Until publication the
broker answers for the new partitions as for any it does not host yet, as Kafka's brokers
apply metadata after the controller has answered.

Nothing else creates or deletes logs while a preparation runs: `apply_image` is the only
other writer and it only runs from `_publish`.

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
from kmirror.coordinator.runtime import GroupCoordinatorService
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

    def __call__(self, old_image: MetadataImage | None, new_image: MetadataImage) -> Iterator[None]:
        rm = self.replica_manager
        yield from rm.apply_image_steps(old_image, new_image)
        yield
        if self.replication is not None:
            self.replication.on_metadata_change(old_image, new_image)
            yield
        self.groups.on_partitions_led(rm.leader_partitions(CONSUMER_OFFSETS))
        self.transactions.on_partitions_led(rm.leader_partitions(TRANSACTION_STATE_TOPIC))
        self.mirrors.on_partitions_led(rm.leader_partitions(MIRROR_STATE_TOPIC))
        yield
        self.mirror_data_plane.on_metadata_change(new_image)


class MetadataPublisher:
    def __init__(self, replica_manager: ReplicaManager, publish_steps: PublishSteps,
                 threshold: int = LARGE_CREATION_PARTITIONS) -> None:
        self._replica_manager = replica_manager
        self._publish_steps = publish_steps
        self._threshold = threshold
        self._published: MetadataImage | None = None
        self._latest: MetadataImage | None = None  # set by `on_change` before a preparation starts
        self._task: asyncio.Task[None] | None = None

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

    async def stop(self) -> None:
        """Wait for a running preparation (a worker thread cannot be interrupted)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    def _unprepared(self, image: MetadataImage, limit: int | None = None) -> list[UnpreparedPartition]:
        """Partitions without a log among the topics changed since the published image."""
        rm = self._replica_manager
        return unprepared_partitions(image, rm.node_id, rm.log_manager, since=self._published, limit=limit)

    async def _prepare_and_publish(self) -> None:
        gc.freeze()
        try:
            while True:  # until no newer image arrived while preparing or publishing
                await self._prepare_latest()
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
            try:
                created = await asyncio.to_thread(self._prepare, image)
            except OSError as exc:  # publishing retries on the loop and reports the disk error
                log.error("creating partition logs failed: %s", exc)
                return
            except Exception:  # a bug must not leave the image unpublished
                log.exception("creating partition logs failed")
                return
            if created:
                log.info("created %d partition logs off the event loop in %.1f s", created, time.monotonic() - started)
            if image is self._latest:
                return

    def _newest(self) -> MetadataImage:
        assert self._latest is not None, "a preparation runs after on_change"
        return self._latest

    def _prepare(self, image: MetadataImage) -> int:
        """On the worker thread: create the logs `image` adds here (listing them is a scan of
        the new topics' partitions, kept off the loop too)."""
        missing = self._unprepared(image)
        prepare_logs(self._replica_manager, image, missing)
        return len(missing)

    def _publish(self, image: MetadataImage) -> Iterator[None]:
        old, self._published = self._published, image
        return self._publish_steps(old, image)
