"""Replicas' log directories on the controller (KIP-858, Kafka's `ReplicationControlManager`
`handleDirectoriesOffline` and `handleAssignReplicasToDirs`).

- A new partition's replica is placed in its broker's only log directory when the broker
  registered exactly one, else `UNASSIGNED` (Kafka's `ClusterDescriber.defaultDir`).
- AssignReplicasToDirs: a broker names the directory of replicas it hosts; each change is a
  PartitionChangeRecord of `directories`. A replica assigned to a directory the broker has
  not online leaves the ISR and its leadership at once.
- A heartbeat's `offline_log_dirs` that were online: the broker's registration keeps only the
  others (BrokerRegistrationChangeRecord `log_dirs`), and every partition whose replica on the
  broker is in one of them loses that replica from its ISR and leadership, as when a broker
  is fenced, but only for those partitions. The replica stays in the partition's replicas:
  an operator reassigns it, or the broker hosts it again once the directory is back.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kmirror.metadata import directories as dir_ids
from kmirror.metadata.controller.partition_change import remove_broker_from_isrs
from kmirror.metadata.controller.result import ApiError, ControllerResult
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.records import BrokerRegistrationChangeRecord, PartitionChangeRecord, Record


def default_directories(image: MetadataImage, replicas: Sequence[int]) -> tuple[uuid.UUID, ...]:
    """The directories of a new partition's replicas (Kafka's `defaultDir`)."""
    out = []
    for b in replicas:
        registration = image.brokers.get(b)
        dirs = () if registration is None else registration.log_dirs
        out.append(dirs[0] if len(dirs) == 1 else dir_ids.UNASSIGNED)
    return tuple(out)


def directories_offline(
    image: MetadataImage, broker_id: int, offline_dirs: Collection[uuid.UUID], eligible: Collection[int],
    broker_unclean_default: bool,
) -> tuple[list[Record], list[tuple[str, int, int]]]:
    """The records for a heartbeat's `offline_log_dirs`: nothing unless one of them was online."""
    registration = image.brokers.get(broker_id)
    if registration is None:
        return [], []
    newly = frozenset(d for d in registration.log_dirs if d in offline_dirs)
    if not newly:
        return [], []
    online = tuple(d for d in registration.log_dirs if d not in newly)
    moves, unclean = remove_broker_from_isrs(
        image, broker_id, frozenset(eligible) - {broker_id}, broker_unclean_default,
        only=lambda reg: reg.directory(broker_id) in newly)
    return [BrokerRegistrationChangeRecord(broker_id, registration.broker_epoch, log_dirs=online), *moves], unclean


@dataclass(frozen=True, slots=True)
class DirAssignment:
    """One replica a broker names the directory of (AssignReplicasToDirs)."""

    directory: uuid.UUID
    topic_id: uuid.UUID
    partition: int


def assign_replicas_to_dirs(
    image: MetadataImage, broker_id: int, broker_epoch: int, assignments: Iterable[DirAssignment],
    eligible: Collection[int], broker_unclean_default: bool,
) -> ControllerResult[tuple[ApiError, dict[DirAssignment, ApiError], list[tuple[str, int, int]]]]:
    """AssignReplicasToDirs: a PartitionChangeRecord per replica whose directory changes; per
    replica UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER (the broker
    holds no replica of it), as Kafka answers; a stale or unknown broker epoch answers the
    whole request. The answer's last part lists unclean elections, for the caller's warning."""
    registration = image.brokers.get(broker_id)
    if registration is None:
        return ControllerResult([], (ApiError(ErrorCode.broker_id_not_registered), {}, []))
    if registration.broker_epoch != broker_epoch:
        return ControllerResult([], (ApiError(ErrorCode.stale_broker_epoch), {}, []))
    errors: dict[DirAssignment, ApiError] = {}
    changed: dict[tuple[uuid.UUID, int], tuple[uuid.UUID, ...]] = {}
    for a in assignments:
        topic = image.topics_by_id.get(a.topic_id)
        reg = None if topic is None else topic.partitions.get(a.partition)
        if topic is None:
            errors[a] = ApiError(ErrorCode.unknown_topic_id)
            continue
        if reg is None:
            errors[a] = ApiError(ErrorCode.unknown_topic_or_partition)
            continue
        if broker_id not in reg.replicas:
            errors[a] = ApiError(ErrorCode.not_leader_or_follower)
            continue
        errors[a] = ApiError(ErrorCode.none)
        dirs = changed.get((a.topic_id, a.partition)) or reg.directories or (dir_ids.MIGRATING,) * len(reg.replicas)
        index = reg.replicas.index(broker_id)
        if dirs[index] == a.directory:
            continue
        dirs = (*dirs[:index], a.directory, *dirs[index + 1:])
        changed[(a.topic_id, a.partition)] = dirs
    records: list[Record] = [PartitionChangeRecord(partition, topic_id, directories=dirs)
                             for (topic_id, partition), dirs in changed.items()]
    unclean: list[tuple[str, int, int]] = []
    if any(not dir_ids.is_online(a.directory, registration.log_dirs) for a in errors):
        after = image.apply(records, image.offset)
        moves, unclean = remove_broker_from_isrs(
            after, broker_id, frozenset(eligible) - {broker_id}, broker_unclean_default,
            only=lambda reg: broker_id in after.offline_replicas(reg))
        records.extend(moves)
    return ControllerResult(records, (ApiError(ErrorCode.none), errors, unclean))
