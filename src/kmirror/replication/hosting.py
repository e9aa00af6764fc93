"""Which partitions this node hosts, in which role and with which configs, as the metadata
image says (Kafka `ReplicaManager.applyDelta`), a part of `ReplicaManager`.

For every partition whose replicas include this node, `apply_image` creates a `Partition`
over a log of the log manager, or updates the one it has (leadership, ISR, topic configs);
it deletes the logs of partitions it no longer hosts and the stray logs found on disk. A
partition whose log dir failed is offline here (`take_offline`, KIP-858) until the image
moves its replica away: it is not hosted again meanwhile.
Partitions this node starts or stops following are announced to role listeners
(`add_role_listener`): that is how the replica fetcher learns what to fetch and from whom.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterator

from kmirror.config.mirror import MIRROR_NAME_CONFIG
from kmirror.config.server import ServerConfig
from kmirror.log.config import LogConfig
from kmirror.log.fs import KafkaStorageError
from kmirror.metadata.config_description import effective_topic_config
from kmirror.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from kmirror.ports import Clock
from kmirror.replication.change_journal import ChangeJournal
from kmirror.replication.partition import Partition, hosted_here, partition_state_from
from kmirror.replication.replica_ports import FollowedPartition, HostedLog, ReplicaLogManager
from kmirror.types import TopicPartition

logger = logging.getLogger("kmirror.replication")

# Partitions brought to a new image's state between two yields of `apply_image_steps`.
APPLY_STEP_PARTITIONS = 200

RoleListener = Callable[[list[FollowedPartition], list[TopicPartition]], None]
"""(partitions to follow from the given leader and epoch, partitions no longer followed)."""


class PartitionHosting:
    # Provided by `ReplicaManager`.
    node_id: int
    log_manager: ReplicaLogManager
    clock: Clock
    config: ServerConfig
    _partitions: dict[TopicPartition, Partition[HostedLog]]
    _image: MetadataImage | None
    _log_configs: dict[str, LogConfig]
    _followed: set[TopicPartition]
    _role_listeners: list[RoleListener]
    _offline: set[TopicPartition]
    changes: ChangeJournal

    def _notify_append(self, tp: TopicPartition) -> None:
        raise NotImplementedError

    @property
    def image(self) -> MetadataImage | None:
        return self._image

    def apply_image(self, old_image: MetadataImage | None, new_image: MetadataImage) -> None:
        """Make the hosted partitions match `new_image` (Kafka `ReplicaManager.applyDelta`)."""
        for _ in self.apply_image_steps(old_image, new_image):
            pass

    def apply_image_steps(self, old_image: MetadataImage | None, new_image: MetadataImage,
                          step_partitions: int = APPLY_STEP_PARTITIONS) -> Iterator[None]:
        """`apply_image` in bounded steps: yields after every `step_partitions` partitions
        brought to the image's state, so that a shell can serve other requests between steps
        when an image adds thousands of partitions. Between steps the partitions not reached
        yet keep their previous state (a new one is not hosted yet), as partitions are updated
        one by one while Kafka's request threads keep serving. The caller runs one
        application at a time and finishes it before starting the next."""
        del old_image  # the new image is complete; the old one is only a hint
        self._image = new_image
        wanted: dict[TopicPartition, tuple[TopicImage, PartitionRegistration]] = {}
        scanned = 0
        for topic in new_image.topics.values():
            for index, registration in topic.partitions.items():
                if hosted_here(registration, self.node_id):
                    wanted[TopicPartition(topic.name, int(index))] = (topic, registration)
            scanned += len(topic.partitions)
            if scanned >= step_partitions:  # the scan of a large image is a step too
                scanned = 0
                yield

        self._offline.intersection_update(wanted)  # a replica moved away is no longer offline here
        removed_partitions = [tp for tp, partition in self._partitions.items()
                              if (entry := wanted.get(tp)) is None or entry[0].topic_id != partition.topic_id]
        if removed_partitions:
            self._remove_partitions(removed_partitions)
        if new_image.offset >= 0:
            # Stray logs (Kafka `LogManager` strays): on disk but not hosted by the image,
            # e.g. a topic deleted, or deleted and recreated, while this node was down, or
            # logs prepared for an image whose topic a newer image deleted. Deleted together:
            # the checkpoints are rewritten once, not once per stray.
            strays: list[TopicPartition] = []
            for scanned, log in enumerate(list(self.log_manager.all_logs()), 1):
                if scanned % step_partitions == 0:
                    yield
                tp = log.topic_partition
                entry = wanted.get(tp)
                if tp not in self._partitions and (
                    entry is None or (log.topic_id is not None and log.topic_id != entry[0].topic_id)
                ):
                    strays.append(tp)
            if strays:
                self.log_manager.delete_logs(strays)

        now_ms = self.clock.monotonic_ms()
        lag_max_ms = self.config.replica_lag_time_max_ms
        follow: list[FollowedPartition] = []
        unfollow: list[TopicPartition] = []
        log_configs: dict[str, LogConfig] = {}
        for done, (tp, (topic, registration)) in enumerate(wanted.items(), 1):
            if done % step_partitions == 0:
                yield
            log_config = log_configs.get(tp.topic)
            if log_config is None:
                log_config = log_configs[tp.topic] = self.log_config(new_image, tp.topic)
            min_isr = log_config.min_insync_replicas
            state = partition_state_from(registration)
            existing = self._partitions.get(tp)
            if existing is None:
                if tp in self._offline:
                    continue
                try:
                    log = self.log_manager.get_or_create_log(
                        tp, topic.topic_id, log_config, is_new=new_image.is_new_replica(registration, self.node_id))
                except KafkaStorageError as exc:
                    logger.error("%s is offline on this broker: %s", tp, exc)
                    self._offline.add(tp)
                    continue
                partition = Partition(tp, topic.topic_id, log, self.node_id, state, min_isr, lag_max_ms,
                                      functools.partial(self._is_isr_eligible, tp))
                self._partitions[tp] = partition
            else:
                partition = existing
                partition.min_insync_replicas = min_isr
                partition.replica_lag_time_max_ms = lag_max_ms
                if self._log_configs.get(tp.topic) != log_config:
                    partition.log.config = log_config
            partition.log.on_change = self.changes.record
            was_leader = existing is not None and existing.is_leader
            partition.assigns_leader_epoch = self.assigns_leader_epoch(new_image, tp.topic)
            change = partition.update_state(state, now_ms)
            if change.follow_leader:
                follow.append(FollowedPartition(tp, topic.topic_id, state.leader, state.leader_epoch))
            elif change.became_leader or (was_leader and not partition.is_leader):
                unfollow.append(tp)
            if change.became_leader or change.follow_leader or change.isr_changed:
                self._notify_append(tp)  # parked acks=all / fetches re-check (leadership, HW)
        self._log_configs = log_configs
        self.changes.reset()  # leadership and epochs moved, partitions came and went: sessions check all
        removed = [tp for tp in self._followed if tp not in self._partitions or self._partitions[tp].is_leader]
        for tp in removed:
            self._followed.discard(tp)
        unfollow = sorted(set(unfollow) | set(removed))
        self._followed.update(f.topic_partition for f in follow)
        if follow or unfollow:
            for role_listener in list(self._role_listeners):
                role_listener(follow, unfollow)

    def _is_isr_eligible(self, tp: TopicPartition, broker_id: int, broker_epoch: int) -> bool:
        """Kafka `isReplicaIsrEligible`, from this broker's image of the cluster; and, as the
        controller's rule (KIP-858), not a replica the controller places in a dir that is not
        online on its broker: proposing it would only be refused (INELIGIBLE_REPLICA), at the
        rate of its fetches, until the broker names the replica's dir."""
        image = self._image
        if image is None:
            return True
        topic = image.topics.get(tp.topic)
        reg = None if topic is None else topic.partitions.get(tp.partition)
        return image.is_isr_eligible(broker_id, broker_epoch) and (
            reg is None or broker_id not in image.offline_replicas(reg))

    def log_config(self, image: MetadataImage, topic: str) -> LogConfig:
        """Topic overrides over broker defaults (Kafka's config resolution), as a LogConfig."""
        return LogConfig.from_topic_config(effective_topic_config(image, topic, self.config))

    @staticmethod
    def assigns_leader_epoch(image: MetadataImage, topic: str) -> bool:
        """False for a mirror topic: it keeps the source's leader epochs (KIP-1279)."""
        return not _keeps_source_epochs(image, topic)

    def replace_log(self, tp: TopicPartition, log: HostedLog) -> None:
        """`tp`'s log moved to another log dir (`LogManager.replace_with_future`): the new
        one serves the partition, its changes told to fetch sessions as before."""
        partition = self._partitions[tp]
        partition.replace_log(log)
        log.on_change = self.changes.record
        self.changes.record(tp)

    def take_offline(self, tps: list[TopicPartition]) -> None:
        """The logs of `tps` were in a log dir that failed (KIP-858): they are no longer hosted
        here, their followers stop, and requests for them answer KAFKA_STORAGE_ERROR until the
        controller moves them (Kafka's `HostedPartition.Offline`)."""
        self._offline.update(tps)
        for tp in tps:
            self._partitions.pop(tp, None)
        unfollow = sorted(tp for tp in tps if tp in self._followed)
        self._followed.difference_update(unfollow)
        if unfollow:
            for role_listener in list(self._role_listeners):
                role_listener([], unfollow)
        self.changes.reset()
        for tp in tps:
            self._notify_append(tp)

    def _remove_partitions(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self._partitions.pop(tp, None)
        self.log_manager.delete_logs(tps)
        for tp in tps:
            self._notify_append(tp)

    def add_role_listener(self, listener: RoleListener) -> None:
        """Called after each image with (partitions to follow from the given leader and epoch,
        partitions no longer followed). The replica fetcher manager listens here."""
        self._role_listeners.append(listener)

    def followed_partitions(self) -> list[FollowedPartition]:
        out = []
        for tp in sorted(self._followed):
            p = self._partitions.get(tp)
            if p is not None and not p.is_leader and p.leader_id >= 0:
                out.append(FollowedPartition(tp, p.topic_id, p.leader_id, p.leader_epoch))
        return out


def _keeps_source_epochs(image: MetadataImage, topic: str) -> bool:
    """The topic is attached to a mirror (KIP-1279 `mirror.name`, not `.removed`): its
    records are the source's, with the source's leader epochs."""
    value = image.topic_config(topic).get(MIRROR_NAME_CONFIG)
    return bool(value) and not str(value).endswith(".removed")
