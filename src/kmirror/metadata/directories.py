"""Which log directory holds each replica (KIP-858, Kafka's `DirectoryId`).

The controller keeps, per partition, one directory id per replica (`PartitionRecord.directories`,
in the order of `replicas`); a broker names the directory of each replica it hosts
(AssignReplicasToDirs) and reports the directories that failed (BrokerHeartbeat
`offline_log_dirs`). A replica counts as online when its broker is eligible and its directory is
one of the broker's online ones. Three reserved ids (Kafka's values):
- `MIGRATING`: the directory is not known (records written before directories were tracked);
  counts as online;
- `UNASSIGNED`: a new replica no directory holds yet (its broker names one once the log
  exists); counts as online;
- `LOST`: the replica's directory is offline and its id unknown; never online.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence

MIGRATING = uuid.UUID(int=0)
UNASSIGNED = uuid.UUID(int=1)
LOST = uuid.UUID(int=2)


def is_reserved(directory: uuid.UUID) -> bool:
    """Kafka's first 100 ids are reserved: no broker generates one as a log directory's id."""
    return directory.int < 100


def is_online(directory: uuid.UUID, online_dirs: Collection[uuid.UUID]) -> bool:
    """Kafka's `DirectoryId.isOnline`: a replica in `directory`, on a broker whose online
    directories are `online_dirs`. A broker that registered no directories counts as online in
    all of them (it halts when its last directory fails)."""
    if directory in (UNASSIGNED, MIGRATING):
        return True
    if directory == LOST:
        return False
    return not online_dirs or directory in online_dirs


def directories_for(replicas: Sequence[int], old_replicas: Sequence[int],
                    old_directories: Sequence[uuid.UUID]) -> tuple[uuid.UUID, ...]:
    """The directories of `replicas` when a partition's replicas change (Kafka's
    `DirectoryId.createDirectoriesFrom`): a replica that stays keeps its directory, a new one is
    `UNASSIGNED`."""
    known = dict(zip(old_replicas, old_directories, strict=False))
    return tuple(known.get(b, UNASSIGNED) for b in replicas)
