"""A broker's log dirs as others see them. DescribeLogDirs: which partitions live in which log
dir, their sizes, and the dirs' space. AssignReplicasToDirs (KIP-858): which of this broker's
replicas the controller places in another dir than the one their log is in, and which answers
ask for the assignment again."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from kmirror.metadata.controller.log_dirs import DirAssignment
from kmirror.metadata.image import MetadataImage
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.outcomes import LogDirDescription, LogDirPartition
from kmirror.replication.partition import Partition
from kmirror.replication.replica_ports import HostedLog, ReplicaLogManager
from kmirror.types import TopicPartition


class DiskUsage(Protocol):
    """Port: (total_bytes, usable_bytes) of the volume holding `path` (KIP-827)."""

    def usage(self, path: str) -> tuple[int, int]: ...


def describe_log_dirs(
    log_manager: ReplicaLogManager,
    partitions: Mapping[TopicPartition, Partition[HostedLog]],
    wanted: Iterable[TopicPartition] | None,
    disk_usage: DiskUsage | None,
) -> list[LogDirDescription]:
    """One description per configured log dir; `wanted` None means every hosted partition.

    Sizes are the log's bytes on disk; this node has no future replicas and no followers
    to lag behind, so `offset_lag` is 0 and `is_future` false (Kafka `describeLogDirs`). A
    failed dir (KIP-858) is answered KAFKA_STORAGE_ERROR without partitions.
    """
    selected = set(partitions) if wanted is None else {tp for tp in wanted if tp in partitions}
    dirs: list[str] = [str(d) for d in log_manager.log_dirs]
    described: dict[str, dict[tuple[str, int], LogDirPartition]] = {d: {} for d in dirs}
    for tp in sorted(selected):
        log = partitions[tp].log
        log_dir = log_manager.log_dir_of(tp) or (dirs[0] if dirs else "")
        described.setdefault(log_dir, {})[(tp.topic, tp.partition)] = LogDirPartition(size_bytes=int(log.size_in_bytes))
    out: list[LogDirDescription] = []
    for log_dir, entries in described.items():
        if log_dir in log_manager.offline_dirs:  # Kafka answers a failed dir with its error alone
            out.append(LogDirDescription(path=log_dir, error=ErrorCode.kafka_storage_error))
            continue
        total, usable = disk_usage.usage(log_dir) if disk_usage is not None else (-1, -1)
        out.append(LogDirDescription(path=log_dir, partitions=entries, total_bytes=total, usable_bytes=usable))
    return out


# Answers after which an assignment is not asked again: done, or the replica is gone from here.
SETTLED = frozenset({ErrorCode.none, ErrorCode.unknown_topic_id, ErrorCode.unknown_topic_or_partition,
                     ErrorCode.not_leader_or_follower})


def dir_assignments(image: MetadataImage, node_id: int, partitions: Iterable[TopicPartition],
                    dir_of: Callable[[TopicPartition], uuid.UUID | None]
                    ) -> tuple[list[DirAssignment], list[TopicPartition]]:
    """Among `partitions`, this node's replicas whose log is in dir `dir_of(tp)` while the
    image places them elsewhere (a new replica is `UNASSIGNED`; a move changes the dir); and
    this node's replicas without a log here yet (`dir_of` None: the log is still being
    created), to be asked about again once it is."""
    out, without_log = [], []
    for tp in partitions:
        topic = image.topics.get(tp.topic)
        reg = None if topic is None else topic.partitions.get(tp.partition)
        if topic is None or reg is None or node_id not in reg.replicas:
            continue
        actual = dir_of(tp)
        if actual is None:
            without_log.append(tp)
        elif reg.directory(node_id) != actual:
            out.append(DirAssignment(actual, topic.topic_id, tp.partition))
    return out, without_log
