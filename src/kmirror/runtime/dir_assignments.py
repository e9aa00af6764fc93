"""Tells the controller which log dir holds each replica this broker hosts (KIP-858, Kafka's
`AssignmentsManager`): after each published image, the replicas whose directory in the image
is not the one their log is in (new replicas are `UNASSIGNED`, a move between log dirs changes
it) go to the controller in one AssignReplicasToDirs request. Only the topics an image changed
are compared, plus the partitions named by `moved`; replicas a failed request carried are
asked for again a second later. A replica whose log is still being created (a large creation
is prepared over several loop turns, and the image may be published to this assigner before
its last logs exist) is compared again at each later publish until it has one: otherwise it
would wait for its topic's next change, and while the controller places it in a lost dir it
cannot rejoin its ISR (INELIGIBLE_REPLICA).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from functools import partial

from kio.schema.errors import ErrorCode

from kmirror.log.log_manager import LogManager
from kmirror.metadata.image import MetadataImage
from kmirror.replication.log_dirs import SETTLED, dir_assignments
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.runtime.broker_lifecycle import BrokerLifecycleManager, ControllerPort, LogDirs
from kmirror.runtime.log_dir_failure import LogDirFailureHandler, OfflineLogDirs
from kmirror.runtime.log_dir_mover import LogDirMover
from kmirror.runtime.metadata_publisher import BrokerPublishSteps
from kmirror.types import TopicPartition

log = logging.getLogger("kmirror.broker_lifecycle")

RETRY_S = 1.0


class DirectoryAssigner:
    def __init__(self, node_id: int, log_manager: LogManager, log_dirs: LogDirs, controller: ControllerPort,
                 broker_epoch: Callable[[], int]) -> None:
        self._node_id = node_id
        self._log_manager = log_manager
        self._log_dirs = log_dirs
        self._controller = controller
        self._broker_epoch = broker_epoch
        self._image: MetadataImage | None = None
        self._dirty: set[TopicPartition] = set()
        self._without_log: set[TopicPartition] = set()
        self._task: asyncio.Task[None] | None = None

    def on_published(self, image: MetadataImage) -> None:
        """An image is published: its changed topics' replicas are compared, and those that
        had no log yet."""
        old, self._image = self._image, image
        for name, topic in image.topics.items():
            if old is None or old.topics.get(name) is not topic:
                self._dirty.update(TopicPartition(name, p) for p in topic.partitions)
        self._dirty |= self._without_log
        self._without_log.clear()
        self._kick()

    def moved(self, tp: TopicPartition) -> None:
        """`tp`'s log moved to another log dir."""
        self._dirty.add(tp)
        self._kick()

    def _kick(self) -> None:
        if self._dirty and self._task is None and self._image is not None:
            self._task = asyncio.get_running_loop().create_task(self._send())

    def _dir_id(self, ids: Mapping[str, uuid.UUID], tp: TopicPartition) -> uuid.UUID | None:
        """The id of the log dir holding `tp`'s log here."""
        return ids.get(self._log_manager.log_dir_of(tp) or "")

    async def _send(self) -> None:
        try:
            while self._dirty and self._image is not None:
                image = self._image
                ids = self._log_dirs.ids(image.cluster_id or "")
                wanted, without_log = dir_assignments(image, self._node_id, self._dirty, partial(self._dir_id, ids))
                self._without_log.update(without_log)
                self._dirty.clear()
                if not wanted:
                    continue
                try:
                    answers = await self._controller.assign_replicas_to_dirs(self._broker_epoch(), wanted)
                except Exception as exc:
                    answers = {a: ErrorCode.unknown_server_error for a in wanted}
                    log.warning("assigning %d replicas to log dirs failed: %s; retrying", len(wanted), exc)
                retry = [a for a, code in answers.items() if code not in SETTLED]
                if retry:
                    self._dirty.update(TopicPartition(t.name, a.partition) for a in retry
                                       if (t := image.topics_by_id.get(a.topic_id)) is not None)
                    await asyncio.sleep(RETRY_S)
                else:
                    log.info("assigned %d replicas to their log dirs", len(wanted))
        finally:
            self._task = None


def serve_log_dirs(failure: LogDirFailureHandler, lifecycle: BrokerLifecycleManager, log_manager: LogManager,
                   replica_manager: ReplicaManager, log_dirs: LogDirs, publish_steps: BrokerPublishSteps,
                   image: MetadataImage, cleaning: Callable[[TopicPartition], bool]) -> LogDirMover:
    """Once the broker serves: a failed log dir goes offline instead of halting the node, the
    controller learns where each replica's log is, and replicas move between log dirs
    (AlterReplicaLogDirs, resuming the moves a restart interrupted). Returns the mover."""
    failure.on_offline = offline = OfflineLogDirs(asyncio.get_running_loop(), log_manager, replica_manager,
                                                  lifecycle.heartbeat_soon, replica_manager.node_id)
    for log_dir in sorted(failure.offline):  # failed since the load, before the broker served
        offline(log_dir)
    assigner = DirectoryAssigner(replica_manager.node_id, log_manager, log_dirs, lifecycle.controller,
                                 lambda: lifecycle.lifecycle.broker_epoch)
    publish_steps.on_published = assigner.on_published
    assigner.on_published(image)
    mover = LogDirMover(log_manager, replica_manager, log_dirs, cleaning)
    mover.on_moved = assigner.moved
    mover.start()
    return mover
