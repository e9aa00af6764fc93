"""A consumer group's `__consumer_offsets` records, in Kafka's record types and layouts
(Kafka `CoordinatorRecordType`; values are flexible-version messages, v0):

  3  ConsumerGroupMetadata                  key (group)          value Epoch
  5  ConsumerGroupMemberMetadata            key (group, member)  value the member's subscription
  6  ConsumerGroupTargetAssignmentMetadata  key (group)          value AssignmentEpoch
  7  ConsumerGroupTargetAssignmentMember    key (group, member)  value TopicPartitions
  8  ConsumerGroupCurrentMemberAssignment   key (group, member)  value epochs, state, partitions

Keys are an int16 record type then int16-length strings; a null value is a tombstone.
A classic member of a consumer group (online migration) has its JoinGroup session timeout and
protocols in type 5's tagged field 0, ClassicMemberMetadata.
Kafka's type 4 (ConsumerGroupPartitionMetadata) is not written: the subscribed topics'
metadata is taken from the cluster's at the first heartbeat after a load.
"""

from __future__ import annotations

import base64
import struct
import uuid
from dataclasses import dataclass

from kmirror.coordinator.consumer_group.member import (
    ClassicMemberMetadata,
    ConsumerGroupMember,
    TopicPartitions,
)
from kmirror.coordinator.consumer_group.state import MemberState
from kmirror.coordinator.group.member import Protocol
from kmirror.coordinator.offsets.records import RecordFormatError

GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = 3, 5, 6, 7, 8
RECORD_TYPES = frozenset({GROUP_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT})
CLASSIC_MEMBER_METADATA_TAG = 0

Record = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    record_type: int
    group_id: str
    member_id: str | None = None


class _Writer:
    def __init__(self, version: int | None) -> None:
        """`version` None: a nested struct (a tagged field's value), which has none."""
        self.parts = [struct.pack(">h", version)] if version is not None else []

    def i8(self, v: int) -> None:
        self.parts.append(struct.pack(">b", v))

    def i32(self, v: int) -> None:
        self.parts.append(struct.pack(">i", v))

    def uvarint(self, v: int) -> None:
        while v >= 0x80:
            self.parts.append(bytes([(v & 0x7F) | 0x80]))
            v >>= 7
        self.parts.append(bytes([v]))

    def string(self, v: str | None) -> None:
        if v is None:
            self.uvarint(0)
            return
        b = v.encode()
        self.uvarint(len(b) + 1)
        self.parts.append(b)

    def strings(self, vs: tuple[str, ...]) -> None:
        self.uvarint(len(vs) + 1)
        for v in vs:
            self.string(v)

    def bytes_(self, v: bytes) -> None:
        self.uvarint(len(v) + 1)
        self.parts.append(v)

    def topic_partitions(self, tps: TopicPartitions) -> None:
        self.uvarint(len(tps) + 1)
        for topic_id, parts in sorted(tps.items(), key=lambda kv: str(kv[0])):
            self.parts.append(topic_id.bytes)
            self.uvarint(len(parts) + 1)
            for p in sorted(parts):
                self.i32(p)
            self.uvarint(0)  # tagged fields

    def done(self, tagged: dict[int, bytes] | None = None) -> bytes:
        """The value, closed by its tagged fields (tag -> encoded value), in tag order."""
        tagged = tagged or {}
        self.uvarint(len(tagged))
        for tag in sorted(tagged):
            self.uvarint(tag)
            self.uvarint(len(tagged[tag]))
            self.parts.append(tagged[tag])
        return b"".join(self.parts)


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise RecordFormatError("record truncated")
        b = self.buf[self.pos : self.pos + n]
        self.pos += n
        return bytes(b)

    def fixed(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        return int(struct.unpack(fmt, self._take(size))[0])

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    def string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._take(n - 1).decode()

    def strings(self) -> tuple[str, ...]:
        n = self.uvarint()
        return tuple(self.string() or "" for _ in range(max(0, n - 1)))

    def bytes_(self) -> bytes:
        return self._take(max(0, self.uvarint() - 1))

    def tagged(self) -> dict[int, bytes]:
        out: dict[int, bytes] = {}
        if self.pos >= len(self.buf):
            return out
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            out[tag] = self._take(self.uvarint())
        return out

    def topic_partitions(self) -> TopicPartitions:
        out: TopicPartitions = {}
        for _ in range(max(0, self.uvarint() - 1)):
            topic_id = uuid.UUID(bytes=self._take(16))
            out[topic_id] = frozenset(self.fixed(">i") for _ in range(max(0, self.uvarint() - 1)))
            self.skip_tagged()
        return out

    def skip_tagged(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


def _key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    parts = [struct.pack(">h", record_type)]
    for s in (group_id, member_id) if member_id is not None else (group_id,):
        b = s.encode()
        parts.append(struct.pack(">h", len(b)) + b)
    return b"".join(parts)


def decode_key(buf: bytes) -> ConsumerGroupKey | None:
    """The consumer-group key in `buf`, or None if it is another record type."""
    (record_type,) = struct.unpack_from(">h", buf, 0)
    if record_type not in RECORD_TYPES:
        return None
    pos, fields = 2, []
    for _ in range(1 if record_type in (GROUP_METADATA, TARGET_METADATA) else 2):
        (n,) = struct.unpack_from(">h", buf, pos)
        fields.append(buf[pos + 2 : pos + 2 + n].decode())
        pos += 2 + n
    return ConsumerGroupKey(record_type, fields[0], fields[1] if len(fields) > 1 else None)


def epoch_record(record_type: int, group_id: str, epoch: int) -> Record:
    """ConsumerGroupMetadata (Epoch) or ConsumerGroupTargetAssignmentMetadata (AssignmentEpoch)."""
    w = _Writer(0)
    w.i32(epoch)
    return _key(record_type, group_id), w.done()


def decode_epoch(buf: bytes) -> int:
    return _Reader(buf[2:]).fixed(">i")


def member_metadata_record(group_id: str, m: ConsumerGroupMember) -> Record:
    w = _Writer(0)
    w.string(m.instance_id)
    w.string(m.rack_id)
    w.string(m.client_id)
    w.string(m.client_host)
    w.strings(m.subscribed_topic_names)
    w.string(m.subscribed_topic_regex)
    w.i32(m.rebalance_timeout_ms)
    w.string(m.server_assignor)
    tagged = {CLASSIC_MEMBER_METADATA_TAG: _classic_metadata(m.classic)} if m.classic is not None else None
    return _key(MEMBER_METADATA, group_id, m.member_id), w.done(tagged)


def _classic_metadata(c: ClassicMemberMetadata) -> bytes:
    """ClassicMemberMetadata: SessionTimeoutMs, SupportedProtocols [Name, Metadata]."""
    w = _Writer(None)
    w.i32(c.session_timeout_ms)
    w.uvarint(len(c.supported_protocols) + 1)
    for p in c.supported_protocols:
        w.string(p.name)
        w.bytes_(p.metadata)
        w.uvarint(0)  # tagged fields
    return w.done()


def _decode_classic_metadata(buf: bytes) -> ClassicMemberMetadata:
    r = _Reader(buf)
    session_timeout_ms = r.fixed(">i")
    protocols = []
    for _ in range(max(0, r.uvarint() - 1)):
        name = r.string() or ""
        protocols.append(Protocol(name, r.bytes_()))
        r.skip_tagged()
    return ClassicMemberMetadata(session_timeout_ms, tuple(protocols))


def decode_member_metadata(member_id: str, buf: bytes) -> ConsumerGroupMember:
    """Kafka's layout. A value that does not read as it, to its last byte, is read as kmirror
    wrote it before it followed Kafka's field order (ServerAssignor before RebalanceTimeoutMs,
    no tagged fields), so that an older data directory still loads."""
    try:
        return _decode_member_metadata(member_id, buf, kafka_order=True)
    except (RecordFormatError, UnicodeDecodeError) as error:
        try:
            return _decode_member_metadata(member_id, buf, kafka_order=False)
        except (RecordFormatError, UnicodeDecodeError):
            raise error from None


def _decode_member_metadata(member_id: str, buf: bytes, *, kafka_order: bool) -> ConsumerGroupMember:
    r = _Reader(buf[2:])
    m = ConsumerGroupMember(
        member_id, instance_id=r.string(), rack_id=r.string(), client_id=r.string() or "",
        client_host=r.string() or "", subscribed_topic_names=r.strings(), subscribed_topic_regex=r.string(),
    )
    if kafka_order:
        timeout, assignor = r.fixed(">i"), r.string()
        m = m.with_changes(rebalance_timeout_ms=timeout, server_assignor=assignor,
                           classic=_classic_from_tags(r.tagged()))
    else:
        assignor, timeout = r.string(), r.fixed(">i")
        r.skip_tagged()
        m = m.with_changes(rebalance_timeout_ms=timeout, server_assignor=assignor)
    if r.pos != len(r.buf):
        raise RecordFormatError("trailing bytes after a ConsumerGroupMemberMetadataValue")
    return m


def _classic_from_tags(tagged: dict[int, bytes]) -> ClassicMemberMetadata | None:
    raw = tagged.get(CLASSIC_MEMBER_METADATA_TAG)
    return _decode_classic_metadata(raw) if raw is not None else None


def target_member_record(group_id: str, member_id: str, tps: TopicPartitions) -> Record:
    w = _Writer(0)
    w.topic_partitions(tps)
    return _key(TARGET_MEMBER, group_id, member_id), w.done()


def decode_target_member(buf: bytes) -> TopicPartitions:
    return _Reader(buf[2:]).topic_partitions()


def current_assignment_record(group_id: str, m: ConsumerGroupMember) -> Record:
    w = _Writer(0)
    w.i32(m.member_epoch)
    w.i32(m.previous_member_epoch)
    w.i8(m.state.value)
    w.topic_partitions(m.assigned)
    w.topic_partitions(m.pending_revocation)
    return _key(CURRENT_ASSIGNMENT, group_id, m.member_id), w.done()


def apply_current_assignment(m: ConsumerGroupMember, buf: bytes) -> ConsumerGroupMember:
    r = _Reader(buf[2:])
    epoch, previous, state = r.fixed(">i"), r.fixed(">i"), r.fixed(">b")
    return m.with_changes(
        member_epoch=epoch, previous_member_epoch=previous, state=MemberState(state),
        assigned=r.topic_partitions(), pending_revocation=r.topic_partitions(),
    )


def tombstone(record_type: int, group_id: str, member_id: str | None = None) -> Record:
    return _key(record_type, group_id, member_id), None


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """Kafka's order when a member goes: current assignment, target, then metadata."""
    return [tombstone(t, group_id, member_id) for t in (CURRENT_ASSIGNMENT, TARGET_MEMBER, MEMBER_METADATA)]


def group_tombstones(group_id: str) -> list[Record]:
    return [tombstone(TARGET_METADATA, group_id), tombstone(GROUP_METADATA, group_id)]


def _tps_fields(tps: TopicPartitions) -> list[dict[str, object]]:
    return [{"topicId": t, "partitions": sorted(ps)} for t, ps in sorted(tps.items(), key=lambda kv: str(kv[0]))]


def value_fields(key: ConsumerGroupKey, value: bytes) -> dict[str, object]:
    """A value's fields under Kafka's JSON names (kafka-dump-log's offsets decoder)."""
    t, member_id = key.record_type, key.member_id or ""
    if t == GROUP_METADATA:
        return {"epoch": decode_epoch(value)}
    if t == TARGET_METADATA:
        return {"assignmentEpoch": decode_epoch(value)}
    if t == TARGET_MEMBER:
        return {"topicPartitions": _tps_fields(decode_target_member(value))}
    if t == MEMBER_METADATA:
        m = decode_member_metadata(member_id, value)
        return {"instanceId": m.instance_id, "rackId": m.rack_id, "clientId": m.client_id,
                "clientHost": m.client_host, "subscribedTopicNames": list(m.subscribed_topic_names),
                "subscribedTopicRegex": m.subscribed_topic_regex, "rebalanceTimeoutMs": m.rebalance_timeout_ms,
                "serverAssignor": m.server_assignor,
                **({"classicMemberMetadata": {
                    "sessionTimeoutMs": m.classic.session_timeout_ms,
                    "supportedProtocols": [{"name": p.name, "metadata": base64.b64encode(p.metadata).decode()}
                                           for p in m.classic.supported_protocols]}} if m.classic else {})}
    m = apply_current_assignment(ConsumerGroupMember(member_id), value)
    return {"memberEpoch": m.member_epoch, "previousMemberEpoch": m.previous_member_epoch, "state": m.state.value,
            "assignedPartitions": _tps_fields(m.assigned),
            "partitionsPendingRevocation": _tps_fields(m.pending_revocation)}
