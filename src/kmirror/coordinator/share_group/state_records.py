"""The `__consumer_offsets` record of a share partition's state (kmirror's; Kafka keeps it
in `__share_group_state` as ShareSnapshot, docs/design/share-groups.md says why here).

Key: int16 record type 1000 (outside Kafka's `__consumer_offsets` record types, so Kafka's
loaders and kmirror's other ones skip it), string group id, 16-byte topic id, int32 partition.
Value: int16 version 0, int32 state epoch, int32 leader epoch, int64 start offset, then the
state batches (int32 count; each int64 first offset, int64 last offset, int8 delivery state,
int16 delivery count). A null value (tombstone) forgets the partition's state.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

SHARE_STATE_RECORD_TYPE = 1000
_VALUE_VERSION = 0
_HEAD = struct.Struct(">hiiqi")
_BATCH = struct.Struct(">qqbh")


@dataclass(frozen=True, slots=True)
class ShareStateKey:
    group_id: str
    topic_id: uuid.UUID
    partition: int


# (first offset, last offset, delivery state, delivery count): Kafka's PersisterStateBatch
PersistedBatch = tuple[int, int, int, int]


@dataclass(frozen=True, slots=True)
class ShareSnapshot:
    state_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[PersistedBatch, ...] = ()


def encode_key(key: ShareStateKey) -> bytes:
    group = key.group_id.encode()
    return struct.pack(">hh", SHARE_STATE_RECORD_TYPE, len(group)) + group + key.topic_id.bytes + struct.pack(
        ">i", key.partition)


def decode_key(buf: bytes) -> ShareStateKey | None:
    """The share state key in `buf`, or None for any other record type."""
    if len(buf) < 4 or struct.unpack_from(">h", buf, 0)[0] != SHARE_STATE_RECORD_TYPE:
        return None
    (n,) = struct.unpack_from(">h", buf, 2)
    group = buf[4:4 + n].decode()
    topic_id = uuid.UUID(bytes=bytes(buf[4 + n:20 + n]))
    (partition,) = struct.unpack_from(">i", buf, 20 + n)
    return ShareStateKey(group, topic_id, partition)


def encode_value(snapshot: ShareSnapshot) -> bytes:
    head = _HEAD.pack(_VALUE_VERSION, snapshot.state_epoch, snapshot.leader_epoch, snapshot.start_offset,
                      len(snapshot.state_batches))
    return head + b"".join(_BATCH.pack(*batch) for batch in snapshot.state_batches)


def decode_value(buf: bytes) -> ShareSnapshot:
    version, state_epoch, leader_epoch, start_offset, count = _HEAD.unpack_from(buf, 0)
    if version != _VALUE_VERSION:
        raise ValueError(f"unknown share state value version {version}")
    batches = tuple(_BATCH.unpack_from(buf, _HEAD.size + i * _BATCH.size) for i in range(count))
    return ShareSnapshot(state_epoch, leader_epoch, start_offset, batches)


def replay(records: list[tuple[bytes, bytes | None]]) -> dict[ShareStateKey, ShareSnapshot]:
    """The share partition states of a loaded `__consumer_offsets` partition, latest record wins."""
    states: dict[ShareStateKey, ShareSnapshot] = {}
    for key_bytes, value in records:
        key = decode_key(key_bytes)
        if key is None:
            continue
        if value is None:
            states.pop(key, None)
        else:
            states[key] = decode_value(value)
    return states
