"""Creating the logs of a large partition creation ahead of `ReplicaManager.apply_image`.

A partition's log costs a directory and several files (segment and index files,
`partition.metadata`, and for a leader `leader-epoch-checkpoint`), 0.3-0.6 ms, so a topic of
thousands of partitions is seconds of file-system work (their fsyncs come later,
`LogManager.flush_new_logs`). `prepare_logs` does exactly the file-system work `apply_image`
would do for partitions that have no log yet, one log per step, so that the runtime can run
it in bounded steps and then publish the image to the replica manager, which finds the logs
in place and writes nothing more for them.

Contract: `prepare_logs` only creates logs missing from the log manager and assigns the
first leader epoch of those this node leads (what `Partition.update_state` assigns on
becoming leader; it then finds the entry present). The caller guarantees nothing else
creates or deletes logs while it runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from uuid import UUID

from kmirror.log.config import LogConfig
from kmirror.log.fs import KafkaStorageError
from kmirror.metadata.image import MetadataImage, TopicImage
from kmirror.replication.partition import hosted_here
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.replication.replica_ports import ReplicaLogManager
from kmirror.types import TopicPartition


@dataclass(frozen=True, slots=True)
class UnpreparedPartition:
    topic_partition: TopicPartition
    topic_id: UUID
    leader: int
    leader_epoch: int
    is_new: bool = True
    """`MetadataImage.is_new_replica` (`LogManager.get_or_create_log`)."""


def unprepared_partitions(image: MetadataImage, node_id: int, log_manager: ReplicaLogManager,
                          since: MetadataImage | None = None, limit: int | None = None) -> list[UnpreparedPartition]:
    """Partitions `image` hosts on `node_id` that have no log yet (at most `limit` of them);
    with `since` (an image already applied), only among the topics changed since it (images
    share every unchanged topic, so an unchanged one is the same object)."""
    return list(islice(_unprepared(image, node_id, log_manager, since), limit))


def _unprepared(image: MetadataImage, node_id: int, log_manager: ReplicaLogManager,
                since: MetadataImage | None) -> Iterator[UnpreparedPartition]:
    before: Mapping[str, TopicImage] = {} if since is None else since.topics
    for topic in image.topics.values():
        if before.get(topic.name) is topic:
            continue
        for index, registration in topic.partitions.items():
            if not hosted_here(registration, node_id):
                continue
            tp = TopicPartition(topic.name, int(index))
            if log_manager.get_log(tp) is None:
                yield UnpreparedPartition(tp, topic.topic_id, int(registration.leader), int(registration.leader_epoch),
                                          image.is_new_replica(registration, node_id))


def prepare_logs(replica_manager: ReplicaManager, image: MetadataImage,
                 partitions: Sequence[UnpreparedPartition]) -> Iterator[None]:
    """Create the logs of `partitions` (see the module docstring), one per step: the caller
    bounds how long each run of steps holds its thread."""
    configs: dict[str, tuple[LogConfig, bool]] = {}
    node_id = replica_manager.node_id
    for p in partitions:
        topic = p.topic_partition.topic
        if topic not in configs:
            configs[topic] = (replica_manager.log_config(image, topic),
                              replica_manager.assigns_leader_epoch(image, topic))
        log_config, assigns_epoch = configs[topic]
        try:
            log = replica_manager.log_manager.get_or_create_log(p.topic_partition, p.topic_id, log_config,
                                                                is_new=p.is_new)
        except KafkaStorageError:
            continue  # a log dir is offline: `apply_image` takes the partition offline
        if p.leader == node_id and assigns_epoch and log.log_end_offset == 0 and p.leader_epoch >= 0:
            log.assign_epoch_start_offset(p.leader_epoch, 0)
        yield
