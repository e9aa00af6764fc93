"""The `__mirror_state` records as values (the byte codecs live in `kmirror.protocol.mirror`).

The KIP's `MirrorPartitionStateKey` holds only MirrorName and its `LastMirrorEpochs` key
only MirrorName too: in a compacted topic every partition of a mirror would then overwrite
the others. kmirror keys each record by the KIP's composite coordination key (mirror name,
topic id, partition) and keeps the partition's state and its last mirrored epoch (LME) in
one value, so compaction keeps exactly the latest state and LME of every mirror partition
(docs/design/mirroring.md "__mirror_state records"). A None value is a tombstone.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from kmirror.kip1279.state import MirrorPartitionState

NO_LAST_MIRRORED_EPOCH = -1


@dataclass(frozen=True, slots=True, order=True)
class MirrorPartitionKey:
    mirror_name: str
    topic_id: UUID
    partition: int


@dataclass(frozen=True, slots=True)
class MirrorPartitionStateValue:
    topic_name: str
    state: MirrorPartitionState
    last_mirrored_epoch: int = NO_LAST_MIRRORED_EPOCH


@dataclass(frozen=True, slots=True, order=True)
class ManagedAclsKey:
    """The mirror's managed ACL bindings (docs/design/mirroring.md "ACL sync: which ACLs the
    mirror manages"), stored in the mirror's metadata partition, the one whose leader syncs it."""

    mirror_name: str


# (resource type, resource name, pattern type, principal, host, operation, permission type)
AclEntry = tuple[int, str, int, str, str, int, int]


@dataclass(frozen=True, slots=True)
class ManagedAclsValue:
    acls: frozenset[AclEntry]


StateRecord = (tuple[MirrorPartitionKey, MirrorPartitionStateValue | None]
               | tuple[ManagedAclsKey, ManagedAclsValue | None])
