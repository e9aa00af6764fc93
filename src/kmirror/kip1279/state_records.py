"""`__mirror_state` record keys and values (KIP-1279 "Metadata Records").

Kafka's coordinator record convention (as `__consumer_offsets` and `__share_group_state`):
  key   = int16 record type (the schema's apiKey) | key fields, non-flexible encoding
  value = int16 version | value fields in that version's encoding; a null value is a tombstone
Both value schemas are flexible in v0: compact strings/arrays and a tagged-field trailer.

Record types:
  1 LastMirrorEpochs     key: MirrorName
                         value v0: Topics[Name, Partitions[PartitionIndex, LastMirrorEpoch]]
  2 MirrorPartitionState key: MirrorName, TopicId, Partition
                         value v0: TopicName, Partition, State (int8)
  3 MirrorManagedAcls    key: MirrorName  (kmirror's, beyond the KIP)
                         value v0: Acls[ResourceType, ResourceName, PatternType, Principal,
                                        Host, Operation, PermissionType]

Choices the KIP leaves open (docs/design/mirroring-protocol.md):
- the KIP names key type 1 "sKey" and leaves the LME field of its value unnamed: here
  `LastMirrorEpochsKey` and `last_mirror_epoch`;
- the KIP's MirrorPartitionStateKey holds only MirrorName. `__mirror_state` is compacted and
  many partitions of one mirror share a coordinator partition, so compaction would keep one
  partition's state per mirror; the key carries the KIP's composite coordinator key
  (mirror name, topic id, partition) instead, keeping every partition's latest state.
  LastMirrorEpochs keeps the KIP's per-mirror key: its value is the mirror's whole LME map
  for the partitions this coordinator partition owns, rewritten on each change.
- MirrorPartitionStateValue has an optional tagged field `last_mirror_epoch` (tag 0,
  default -1, not written at -1) so the coordinator can keep a partition's state and LME in
  one compacted record.
- State codes (`kmirror.kip1279.state.MirrorPartitionState`): the KIP's dump shows a freshly added partition written as 0 then 1, and
  UNKNOWN is "just the absence of state", so PREPARING=0 ... FAILED=6; UNKNOWN (-1) is never
  written.
"""

import io
import uuid
from dataclasses import dataclass, field
from typing import ClassVar, TypeAlias, TypeVar

from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i8, i16, i32

from kmirror.kip1279.state import MirrorPartitionState as MirrorPartitionState  # the int8 codes

LAST_MIRROR_EPOCHS_TYPE = 1
MIRROR_PARTITION_STATE_TYPE = 2
MIRROR_MANAGED_ACLS_TYPE = 3
VALUE_VERSION = 0


class MirrorStateRecordError(Exception):
    """A `__mirror_state` record this node cannot parse (corrupt, unknown type or version)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LastMirrorEpochsKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    mirror_name: str = field(metadata={"kafka_type": "string"})
    """The cluster mirror name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LastMirrorEpochsPartition:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    """The partition index."""
    last_mirror_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The last mirror leader epoch for this partition."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LastMirrorEpochsTopic:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    name: str = field(metadata={"kafka_type": "string"})
    """The topic name."""
    partitions: tuple[LastMirrorEpochsPartition, ...]
    """Each partition to record the last mirrored epochs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LastMirrorEpochsValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topics: tuple[LastMirrorEpochsTopic, ...]
    """The mirror topics for which we want to store the last mirrored epochs."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MirrorPartitionStateKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    mirror_name: str = field(metadata={"kafka_type": "string"})
    """The cluster mirror name."""
    topic_id: uuid.UUID = field(metadata={"kafka_type": "uuid"})
    """The mirror topic's id (the source's topic id)."""
    partition: i32 = field(metadata={"kafka_type": "int32"})
    """The partition index."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MirrorPartitionStateValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_name: str = field(metadata={"kafka_type": "string"})
    """The topic name."""
    partition: i32 = field(metadata={"kafka_type": "int32"})
    """The partition index."""
    state: i8 = field(metadata={"kafka_type": "int8"})
    """The mirror partition state (`MirrorPartitionState`)."""
    last_mirror_epoch: i32 = field(metadata={"kafka_type": "int32", "tag": 0}, default=i32(-1))
    """kmirror's tagged field: the partition's LME, so one compacted record per partition holds
    both; omitted at -1, which leaves the value byte-identical to the KIP's v0."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MirrorManagedAclsKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    mirror_name: str = field(metadata={"kafka_type": "string"})
    """The cluster mirror name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ManagedAcl:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    resource_type: i8 = field(metadata={"kafka_type": "int8"})
    resource_name: str = field(metadata={"kafka_type": "string"})
    pattern_type: i8 = field(metadata={"kafka_type": "int8"})
    principal: str = field(metadata={"kafka_type": "string"})
    host: str = field(metadata={"kafka_type": "string"})
    operation: i8 = field(metadata={"kafka_type": "int8"})
    permission_type: i8 = field(metadata={"kafka_type": "int8"})


@dataclass(frozen=True, slots=True, kw_only=True)
class MirrorManagedAclsValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    acls: tuple[ManagedAcl, ...]
    """The destination ACL bindings the mirror's ACL sync manages (copied from the source,
    within `mirror.acl.include`): the ones it deletes when the source drops them."""


MirrorStateKey: TypeAlias = LastMirrorEpochsKey | MirrorPartitionStateKey | MirrorManagedAclsKey
MirrorStateValue: TypeAlias = LastMirrorEpochsValue | MirrorPartitionStateValue | MirrorManagedAclsValue
Entity = TypeVar("Entity", bound=MirrorStateKey | MirrorStateValue)

_KEY_TYPES: dict[int, type[MirrorStateKey]] = {
    LAST_MIRROR_EPOCHS_TYPE: LastMirrorEpochsKey,
    MIRROR_PARTITION_STATE_TYPE: MirrorPartitionStateKey,
    MIRROR_MANAGED_ACLS_TYPE: MirrorManagedAclsKey,
}
_VALUE_TYPES: dict[int, type[MirrorStateValue]] = {
    LAST_MIRROR_EPOCHS_TYPE: LastMirrorEpochsValue,
    MIRROR_PARTITION_STATE_TYPE: MirrorPartitionStateValue,
    MIRROR_MANAGED_ACLS_TYPE: MirrorManagedAclsValue,
}
_TYPE_OF_KEY: dict[type[MirrorStateKey], int] = {cls: t for t, cls in _KEY_TYPES.items()}
_TYPE_OF_VALUE: dict[type[MirrorStateValue], int] = {cls: t for t, cls in _VALUE_TYPES.items()}


def _write(entity: MirrorStateKey | MirrorStateValue) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return buf.getvalue()


def _read(cls: type[Entity], data: bytes, offset: int) -> Entity:
    try:
        entity, size = entity_reader(cls)(data, offset)
    except Exception as e:  # the native reader raises several kinds on bad input
        raise MirrorStateRecordError(f"cannot decode {cls.__name__}: {e}") from e
    if offset + size != len(data):
        raise MirrorStateRecordError(f"{len(data) - offset - size} trailing bytes after {cls.__name__}")
    return entity


def _int16(data: bytes, what: str) -> int:
    if len(data) < 2:
        raise MirrorStateRecordError(f"{what} shorter than its int16 prefix")
    return int.from_bytes(data[:2], "big", signed=True)


def encode_key(key: MirrorStateKey) -> bytes:
    return _TYPE_OF_KEY[type(key)].to_bytes(2, "big", signed=True) + _write(key)


def encode_value(value: MirrorStateValue | None) -> bytes | None:
    """The value bytes; None (a tombstone) stays None."""
    if value is None:
        return None
    _TYPE_OF_VALUE[type(value)]  # KeyError for a foreign type: a programming error
    return VALUE_VERSION.to_bytes(2, "big", signed=True) + _write(value)


def record_type(key: bytes) -> int:
    return _int16(key, "key")


def decode_key(key: bytes) -> MirrorStateKey:
    type_id = _int16(key, "key")
    cls = _KEY_TYPES.get(type_id)
    if cls is None:
        raise MirrorStateRecordError(f"unknown __mirror_state record type {type_id}")
    result: MirrorStateKey = _read(cls, bytes(key), 2)
    return result


def decode_value(type_id: int, value: bytes | None) -> MirrorStateValue | None:
    """The value of a record of `type_id`; None for a tombstone."""
    if value is None:
        return None
    cls = _VALUE_TYPES.get(type_id)
    if cls is None:
        raise MirrorStateRecordError(f"unknown __mirror_state record type {type_id}")
    version = _int16(value, "value")
    if version != VALUE_VERSION:
        raise MirrorStateRecordError(f"unsupported {cls.__name__} version {version}")
    result: MirrorStateValue = _read(cls, bytes(value), 2)
    return result


def decode(key: bytes, value: bytes | None) -> tuple[MirrorStateKey, MirrorStateValue | None]:
    decoded_key = decode_key(key)
    return decoded_key, decode_value(_TYPE_OF_KEY[type(decoded_key)], value)
