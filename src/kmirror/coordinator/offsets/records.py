"""`__consumer_offsets` record keys and values in Kafka's own formats, so Kafka tooling
(`kafka-console-consumer --formatter ...OffsetsMessageFormatter`) can read what we write.

Keys start with an int16 version naming the record type (Kafka `CoordinatorRecordType`):
  0, 1  OffsetCommitKey     group, topic, partition
  2     GroupMetadataKey    group
Values start with an int16 version. We write OffsetCommitValue v3 (offset, leader_epoch,
metadata, commit_timestamp), or v1 (offset, metadata, commit_timestamp, expire_timestamp) for
an offset with an explicit expire timestamp, as Kafka does, and GroupMetadataValue v3; we
read v0-v3 of both (v4, the flexible encoding, is not read yet). A null value is a tombstone.
Strings are int16-length UTF-8, bytes int32-length, arrays int32-count (non-flexible Kafka
encoding).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kmirror.coordinator.group.group import OffsetAndMetadata

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
# the one version with an expire timestamp (Kafka `offsetCommitValueVersion(expireTimestampPresent)`)
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
NO_EXPIRE_TIMESTAMP = -1  # Kafka `OffsetCommitRequest.DEFAULT_TIMESTAMP`
GROUP_METADATA_VALUE_VERSION = 3


class RecordFormatError(Exception):
    """A `__consumer_offsets` record this node cannot parse (corrupt or unknown version)."""


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberRecord, ...]


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i16(self, v: int) -> None:
        self.parts.append(struct.pack(">h", v))

    def i32(self, v: int) -> None:
        self.parts.append(struct.pack(">i", v))

    def i64(self, v: int) -> None:
        self.parts.append(struct.pack(">q", v))

    def string(self, v: str | None) -> None:
        if v is None:
            self.i16(-1)
            return
        b = v.encode()
        self.i16(len(b))
        self.parts.append(b)

    def bytes_(self, v: bytes) -> None:
        self.i32(len(v))
        self.parts.append(v)

    def done(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _unpack(self, fmt: str, size: int) -> int:
        if self.pos + size > len(self.buf):
            raise RecordFormatError("record truncated")
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return int(v)

    def i16(self) -> int:
        return self._unpack(">h", 2)

    def i32(self) -> int:
        return self._unpack(">i", 4)

    def i64(self) -> int:
        return self._unpack(">q", 8)

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise RecordFormatError("record truncated")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return bytes(b)

    def nullable_string(self) -> str | None:
        n = self.i16()
        return None if n == -1 else self._take(n).decode()

    def string(self) -> str:
        s = self.nullable_string()
        if s is None:
            raise RecordFormatError("null in a non-nullable string")
        return s

    def bytes_(self) -> bytes:
        n = self.i32()
        return b"" if n == -1 else self._take(n)


def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    w = _Writer()
    w.i16(OFFSET_COMMIT_KEY_VERSION)
    w.string(key.group)
    w.string(key.topic)
    w.i32(key.partition)
    return w.done()


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    w = _Writer()
    w.i16(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return w.done()


def decode_key(buf: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """The key's record type; None for record types this coordinator does not own
    (consumer-group and share-group records of newer Kafka), which loading skips."""
    r = _Reader(buf)
    version = r.i16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupMetadataKey(r.string())
    return None


def encode_offset_commit_value(value: OffsetAndMetadata) -> bytes:
    w = _Writer()
    if value.expire_timestamp_ms is not None:
        w.i16(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY)
        w.i64(value.offset)
        w.string(value.metadata)
        w.i64(value.commit_timestamp_ms)
        w.i64(value.expire_timestamp_ms)
        return w.done()
    w.i16(OFFSET_COMMIT_VALUE_VERSION)
    w.i64(value.offset)
    w.i32(value.leader_epoch)
    w.string(value.metadata)
    w.i64(value.commit_timestamp_ms)
    return w.done()


def decode_offset_commit_value(buf: bytes) -> OffsetAndMetadata:
    r = _Reader(buf)
    version = r.i16()
    if not 0 <= version <= 3:
        raise RecordFormatError(f"OffsetCommitValue version {version} not supported")
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string()
    commit_timestamp_ms = r.i64()
    expire_timestamp_ms = r.i64() if version == 1 else NO_EXPIRE_TIMESTAMP
    return OffsetAndMetadata(offset, leader_epoch, metadata, commit_timestamp_ms,
                             None if expire_timestamp_ms == NO_EXPIRE_TIMESTAMP else expire_timestamp_ms)


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    w = _Writer()
    w.i16(GROUP_METADATA_VALUE_VERSION)
    w.string(value.protocol_type)
    w.i32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    w.i64(value.current_state_timestamp_ms)
    w.i32(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        w.i32(m.rebalance_timeout_ms)
        w.i32(m.session_timeout_ms)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
    return w.done()


def decode_group_metadata_value(buf: bytes) -> GroupMetadataValue:
    r = _Reader(buf)
    version = r.i16()
    if not 0 <= version <= 3:
        raise RecordFormatError(f"GroupMetadataValue version {version} not supported")
    protocol_type = r.string()
    generation = r.i32()
    protocol = r.nullable_string()
    leader = r.nullable_string()
    timestamp = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.string()
        instance_id = r.nullable_string() if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        session = rebalance = 0
        if version >= 1:
            rebalance = r.i32()
        session = r.i32()
        if version == 0:
            rebalance = session
        members.append(
            MemberRecord(member_id, instance_id, client_id, client_host, rebalance, session, r.bytes_(), r.bytes_())
        )
    return GroupMetadataValue(protocol_type, generation, protocol, leader, timestamp, tuple(members))
