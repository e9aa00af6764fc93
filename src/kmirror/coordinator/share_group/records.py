"""The `__consumer_offsets` records of share group membership (kmirror's record types 1001
and 1002, outside Kafka's, as `state_records`' 1000; Kafka writes ShareGroupMetadata and
ShareGroupMemberMetadata there, whose value schemas kmirror does not copy).

- 1001, key: string group id. Value: int16 version 0, int32 group epoch. A tombstone deletes
  the group.
- 1002, key: string group id, string member id. Value: int16 version 0, int32 member epoch,
  nullable string rack id, string client id, string client host, int32 count then each
  subscribed topic name. A tombstone removes the member.

Assignments are not written: the assignor is a function of the members and the topics, so
loading computes them again (at the stored group epoch).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from kmirror.coordinator.share_group.group import ShareGroup, ShareGroupMember

GROUP_RECORD_TYPE, MEMBER_RECORD_TYPE = 1001, 1002
_VERSION = 0
Record = tuple[bytes, bytes | None]


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def i16(self) -> int:
        (value,) = struct.unpack_from(">h", self.buf, self.pos)
        self.pos += 2
        return int(value)

    def i32(self) -> int:
        (value,) = struct.unpack_from(">i", self.buf, self.pos)
        self.pos += 4
        return int(value)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        value = self.buf[self.pos:self.pos + n].decode()
        self.pos += n
        return value


def group_record(group: ShareGroup) -> Record:
    return struct.pack(">h", GROUP_RECORD_TYPE) + _string(group.group_id), struct.pack(">hi", _VERSION,
                                                                                       group.group_epoch)


def group_tombstone(group_id: str) -> Record:
    return struct.pack(">h", GROUP_RECORD_TYPE) + _string(group_id), None


def member_record(group_id: str, member: ShareGroupMember) -> Record:
    value = (struct.pack(">hi", _VERSION, member.member_epoch) + _string(member.rack_id) + _string(member.client_id)
             + _string(member.client_host) + struct.pack(">i", len(member.subscribed_topic_names))
             + b"".join(_string(t) for t in member.subscribed_topic_names))
    return _member_key(group_id, member.member_id), value


def member_tombstone(group_id: str, member_id: str) -> Record:
    return _member_key(group_id, member_id), None


def _member_key(group_id: str, member_id: str) -> bytes:
    return struct.pack(">h", MEMBER_RECORD_TYPE) + _string(group_id) + _string(member_id)


def replay(records: Iterable[Record]) -> dict[str, ShareGroup]:
    """The share groups of a loaded `__consumer_offsets` partition (members without their
    assignments, which `heartbeat.reassign` computes), latest record wins."""
    groups: dict[str, ShareGroup] = {}
    for key, value in records:
        if len(key) < 2:
            continue
        reader = _Reader(key)
        record_type = reader.i16()
        if record_type not in (GROUP_RECORD_TYPE, MEMBER_RECORD_TYPE):
            continue
        group_id = reader.string() or ""
        if record_type == GROUP_RECORD_TYPE:
            if value is None:
                groups.pop(group_id, None)
            else:
                v = _Reader(value)
                v.i16()
                groups.setdefault(group_id, ShareGroup(group_id)).group_epoch = v.i32()
            continue
        member_id = reader.string() or ""
        group = groups.setdefault(group_id, ShareGroup(group_id))
        if value is None:
            group.members.pop(member_id, None)
            continue
        v = _Reader(value)
        v.i16()
        epoch, rack_id, client_id, client_host = v.i32(), v.string(), v.string() or "", v.string() or ""
        topics = tuple(v.string() or "" for _ in range(v.i32()))
        group.members[member_id] = ShareGroupMember(member_id, epoch, rack_id, client_id, client_host, topics)
    return groups
