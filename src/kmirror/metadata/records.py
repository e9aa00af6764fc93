"""Metadata records: KRaft's metadata log entries (Kafka `metadata/*Record.json`) as values.

Every record carries Kafka's apiKey as `TYPE_ID` and its schema version as `VERSION`.
`ClusterIdRecord` is kmirror's own (type id 10000): Kafka keeps the cluster id only in
`meta.properties`; kmirror also writes it into the log so the image is self-describing.

Frame (see docs/design/metadata.md): `frame_version:u8 | type_id:i16 | record_version:i16 |
JSON object of the record's fields` (big-endian; UUIDs as canonical strings, tuples as arrays).
"""

from __future__ import annotations

import base64
import json
import struct
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar, Final, NamedTuple

FRAME_VERSION = 0
_HEADER = struct.Struct(">Bhh")

# PartitionChangeRecord.leader sentinels (Kafka's LeaderConstants).
NO_LEADER = -1
NO_LEADER_CHANGE = -2


class CorruptMetadataRecordError(ValueError):
    """A frame that does not decode: broken invariant of the metadata log."""


class BrokerEndpoint(NamedTuple):
    name: str
    host: str
    port: int
    security_protocol: int = 0  # PLAINTEXT


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    """`log_dirs`: the ids of the broker's log directories (Kafka's LogDirs, v2+);
    `cordoned_log_dirs`: those cordoned (KIP-1066), None until the broker reports them."""

    TYPE_ID: ClassVar[int] = 0
    VERSION: ClassVar[int] = 4
    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None
    fenced: bool = True
    log_dirs: tuple[uuid.UUID, ...] = ()
    cordoned_log_dirs: tuple[uuid.UUID, ...] | None = None


@dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    TYPE_ID: ClassVar[int] = 1
    VERSION: ClassVar[int] = 0
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class TopicRecord:
    TYPE_ID: ClassVar[int] = 2
    VERSION: ClassVar[int] = 0
    name: str
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    """`directories`: the log directory of each replica, in the order of `replicas` (KIP-858,
    v2; empty: not tracked, as `MIGRATING` for each)."""

    TYPE_ID: ClassVar[int] = 3
    VERSION: ClassVar[int] = 2
    partition_id: int
    topic_id: uuid.UUID
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    directories: tuple[uuid.UUID, ...] = ()


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    TYPE_ID: ClassVar[int] = 4
    VERSION: ClassVar[int] = 0
    resource_type: int
    resource_name: str
    name: str
    value: str | None
    """None removes the dynamic value."""


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """Only the fields that change; `leader` NO_LEADER_CHANGE keeps it. A leader change bumps the
    leader epoch; every change bumps the partition epoch (Kafka's PartitionRegistration.merge).
    `directories` (KIP-858, v2): the replicas' log directories, in the order of the replicas
    after the change; None keeps them (new replicas get `UNASSIGNED`)."""

    TYPE_ID: ClassVar[int] = 5
    VERSION: ClassVar[int] = 2
    partition_id: int
    topic_id: uuid.UUID
    isr: tuple[int, ...] | None = None
    leader: int = NO_LEADER_CHANGE
    replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    """None keeps them; () clears them (a reassignment completed or cancelled)."""
    adding_replicas: tuple[int, ...] | None = None
    directories: tuple[uuid.UUID, ...] | None = None


@dataclass(frozen=True, slots=True)
class FenceBrokerRecord:
    TYPE_ID: ClassVar[int] = 7
    VERSION: ClassVar[int] = 0
    id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class UnfenceBrokerRecord:
    TYPE_ID: ClassVar[int] = 8
    VERSION: ClassVar[int] = 0
    id: int
    epoch: int


@dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    """A registered broker's state changes (Kafka's record 17, version 3): entering controlled
    shutdown, so that every broker's image knows it is no longer eligible for an ISR (Kafka
    `Partition.isReplicaIsrEligible`; `in_controlled_shutdown` 1 enters it, 0 keeps it; a new
    registration of the broker ends it), the log directories it holds cordoned (KIP-1066;
    None keeps them), and its log directories still online (`log_dirs`, KIP-858: those a
    heartbeat reported offline are left out; None keeps them)."""

    TYPE_ID: ClassVar[int] = 17
    VERSION: ClassVar[int] = 3
    broker_id: int
    broker_epoch: int
    in_controlled_shutdown: int = 0
    cordoned_log_dirs: tuple[uuid.UUID, ...] | None = None
    log_dirs: tuple[uuid.UUID, ...] | None = None


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    TYPE_ID: ClassVar[int] = 9
    VERSION: ClassVar[int] = 0
    topic_id: uuid.UUID


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    TYPE_ID: ClassVar[int] = 12
    VERSION: ClassVar[int] = 0
    name: str
    feature_level: int
    """0 removes the feature."""


@dataclass(frozen=True, slots=True)
class ClientQuotaRecord:
    """Kafka's ClientQuotaRecord: `entity` is sorted `(entity_type, entity_name)` pairs (a None
    name is the default entity); `remove` drops `key` from the entity."""

    TYPE_ID: ClassVar[int] = 14
    VERSION: ClassVar[int] = 0
    entity: tuple[tuple[str, str | None], ...]
    key: str
    value: float = 0.0
    remove: bool = False


NO_BROKER: Final = -1
"""ProducerIdsRecord.broker_id of a block fence rather than a block given to a broker."""


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    TYPE_ID: ClassVar[int] = 15
    VERSION: ClassVar[int] = 0
    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True, slots=True)
class NoOpRecord:
    TYPE_ID: ClassVar[int] = 20
    VERSION: ClassVar[int] = 0


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    TYPE_ID: ClassVar[int] = 23
    VERSION: ClassVar[int] = 0
    id: uuid.UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    TYPE_ID: ClassVar[int] = 24
    VERSION: ClassVar[int] = 0
    id: uuid.UUID


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    """One user's credential for one SCRAM mechanism (Kafka's record 11): never the password."""

    TYPE_ID: ClassVar[int] = 11
    VERSION: ClassVar[int] = 0
    name: str
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    TYPE_ID: ClassVar[int] = 22
    VERSION: ClassVar[int] = 0
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class DelegationTokenRecord:
    """A delegation token, created or renewed (Kafka's record 25): principals as `User:name`,
    times in wall-clock ms; never its HMAC, which every node derives from the id."""

    TYPE_ID: ClassVar[int] = 25
    VERSION: ClassVar[int] = 0
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp: int
    max_timestamp: int
    expiration_timestamp: int
    token_id: str


@dataclass(frozen=True, slots=True)
class RemoveDelegationTokenRecord:
    TYPE_ID: ClassVar[int] = 26
    VERSION: ClassVar[int] = 0
    token_id: str


@dataclass(frozen=True, slots=True)
class ClusterIdRecord:
    TYPE_ID: ClassVar[int] = 10000
    VERSION: ClassVar[int] = 0
    cluster_id: str


Record = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | TopicRecord
    | PartitionRecord
    | ConfigRecord
    | PartitionChangeRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | BrokerRegistrationChangeRecord
    | RemoveTopicRecord
    | FeatureLevelRecord
    | ClientQuotaRecord
    | ProducerIdsRecord
    | NoOpRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | UserScramCredentialRecord
    | RemoveUserScramCredentialRecord
    | DelegationTokenRecord
    | RemoveDelegationTokenRecord
    | ClusterIdRecord
)

RECORD_TYPES: dict[int, type[Any]] = {
    cls.TYPE_ID: cls
    for cls in (
        RegisterBrokerRecord,
        UnregisterBrokerRecord,
        TopicRecord,
        PartitionRecord,
        ConfigRecord,
        PartitionChangeRecord,
        FenceBrokerRecord,
        UnfenceBrokerRecord,
        BrokerRegistrationChangeRecord,
        RemoveTopicRecord,
        FeatureLevelRecord,
        ClientQuotaRecord,
        ProducerIdsRecord,
        NoOpRecord,
        AccessControlEntryRecord,
        RemoveAccessControlEntryRecord,
        UserScramCredentialRecord,
        RemoveUserScramCredentialRecord,
        DelegationTokenRecord,
        RemoveDelegationTokenRecord,
        ClusterIdRecord,
    )
}



def _tuple_or_none(v: Any) -> Any:
    return None if v is None else tuple(v)


def _uuids_or_none(v: Any) -> Any:
    return None if v is None else tuple(uuid.UUID(d) for d in v)


_CONVERTERS: dict[tuple[type[Any], str], Callable[[Any], Any]] = {
    (RegisterBrokerRecord, "endpoints"): lambda v: tuple(BrokerEndpoint(*e) for e in v),
    (RegisterBrokerRecord, "log_dirs"): lambda v: tuple(uuid.UUID(d) for d in v),
    (RegisterBrokerRecord, "cordoned_log_dirs"): _uuids_or_none,
    (BrokerRegistrationChangeRecord, "cordoned_log_dirs"): _uuids_or_none,
    (BrokerRegistrationChangeRecord, "log_dirs"): _uuids_or_none,
    (PartitionRecord, "directories"): lambda v: tuple(uuid.UUID(d) for d in v),
    (PartitionChangeRecord, "directories"): _uuids_or_none,
    (PartitionRecord, "replicas"): tuple,
    (PartitionRecord, "isr"): tuple,
    (PartitionRecord, "removing_replicas"): tuple,
    (PartitionRecord, "adding_replicas"): tuple,
    (PartitionChangeRecord, "isr"): _tuple_or_none,
    (PartitionChangeRecord, "replicas"): _tuple_or_none,
    (PartitionChangeRecord, "removing_replicas"): _tuple_or_none,
    (PartitionChangeRecord, "adding_replicas"): _tuple_or_none,
    (UserScramCredentialRecord, "salt"): base64.b64decode,
    (UserScramCredentialRecord, "stored_key"): base64.b64decode,
    (UserScramCredentialRecord, "server_key"): base64.b64decode,
    (DelegationTokenRecord, "renewers"): tuple,
    (ClientQuotaRecord, "entity"): lambda v: tuple((str(t), n) for t, n in v),
}


def _json_default(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    raise TypeError(f"cannot encode {type(value).__name__}")


def encode(record: Record) -> bytes:
    body = {f.name: getattr(record, f.name) for f in fields(record)}
    payload = json.dumps(body, default=_json_default, separators=(",", ":"), sort_keys=True)
    return _HEADER.pack(FRAME_VERSION, record.TYPE_ID, record.VERSION) + payload.encode()


def decode(data: bytes) -> Record:
    if len(data) < _HEADER.size:
        raise CorruptMetadataRecordError(f"metadata record frame of {len(data)} bytes is too short")
    frame_version, type_id, version = _HEADER.unpack_from(data)
    if frame_version != FRAME_VERSION:
        raise CorruptMetadataRecordError(f"unknown metadata frame version {frame_version}")
    cls = RECORD_TYPES.get(type_id)
    if cls is None:
        raise CorruptMetadataRecordError(f"unknown metadata record type {type_id}")
    if version > cls.VERSION:
        raise CorruptMetadataRecordError(f"{cls.__name__} version {version} is newer than {cls.VERSION}")
    try:
        body = json.loads(bytes(data[_HEADER.size :]))
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in body:
                continue
            value = body[f.name]
            conv = _CONVERTERS.get((cls, f.name))
            if conv is not None:
                value = conv(value)
            elif f.type in ("uuid.UUID", uuid.UUID) and value is not None:
                value = uuid.UUID(value)
            kwargs[f.name] = value
        record: Record = cls(**kwargs)
    except (ValueError, TypeError) as e:
        raise CorruptMetadataRecordError(f"bad {cls.__name__} body: {e}") from None
    return record


def as_dict(record: Record) -> dict[str, Any]:
    return asdict(record)
