"""The `consumer` embedded protocol (Kafka `ConsumerProtocol`): what a classic consumer puts in
its JoinGroup metadata (`ConsumerProtocolSubscription`) and what a leader hands out in SyncGroup
(`ConsumerProtocolAssignment`). Non-flexible encoding: int16 version first, int16-length
strings, int32-counted arrays, int32-length nullable bytes.

    Subscription  v0: Topics, UserData    v1: + OwnedPartitions    v2: + GenerationId
                  v3: + RackId
    Assignment    v0-v3: AssignedPartitions, UserData

As Kafka's `ConsumerProtocol.deserialize*`, a version above the highest known (3) is read as
the highest; fields after the topics that a shorter buffer lacks take their defaults. The
group coordinator reads subscriptions for OffsetDelete (KIP-496), offset expiry and the classic
members of consumer groups (online migration), and writes assignments for those members; the
admin client reads a classic member's assignment (DescribeGroups)."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

CONSUMER_PROTOCOL_TYPE = "consumer"
HIGHEST_VERSION = 3


class ConsumerProtocolError(Exception):
    """Metadata or an assignment that is not the `consumer` protocol (Kafka `SchemaException`)."""


@dataclass(frozen=True, slots=True)
class ConsumerSubscription:
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    # topic name -> partitions the member owns (v1+; cooperative members report them)
    owned_partitions: tuple[tuple[str, tuple[int, ...]], ...] = ()
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class ConsumerAssignment:
    version: int
    partitions: tuple[tuple[str, tuple[int, ...]], ...]
    user_data: bytes | None = None


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def at_end(self) -> bool:
        return self.pos >= len(self.buf)

    def _unpack(self, fmt: str) -> int:
        try:
            (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        except struct.error as exc:
            raise ConsumerProtocolError("buffer underflow") from exc
        self.pos += struct.calcsize(fmt)
        return int(value)

    def i16(self) -> int:
        return self._unpack(">h")

    def i32(self) -> int:
        return self._unpack(">i")

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise ConsumerProtocolError("buffer underflow")
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        try:
            return self._take(n).decode()
        except UnicodeDecodeError as exc:
            raise ConsumerProtocolError("invalid string") from exc

    def nullable_bytes(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self._take(n)

    def count(self) -> int:
        n = self.i32()
        if n < 0 or n > len(self.buf):
            raise ConsumerProtocolError(f"invalid array length {n}")
        return n

    def topic_partitions(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        out = []
        for _ in range(self.count()):
            topic = self.string() or ""
            out.append((topic, tuple(self.i32() for _ in range(self.count()))))
        return tuple(out)


def _version(reader: _Reader) -> int:
    version = reader.i16()
    if version < 0:
        raise ConsumerProtocolError(f"unsupported version {version}")
    return min(version, HIGHEST_VERSION)


def protocol_version(metadata: bytes) -> int:
    """The version a member's subscription is written in (its assignment is written in the same)."""
    return _version(_Reader(metadata))


def decode_subscription(metadata: bytes) -> ConsumerSubscription:
    r = _Reader(metadata)
    version = _version(r)
    topics = tuple(r.string() or "" for _ in range(r.count()))
    user_data = r.nullable_bytes() if not r.at_end() else None
    owned: tuple[tuple[str, tuple[int, ...]], ...] = ()
    generation, rack = -1, None
    if version >= 1 and not r.at_end():
        owned = r.topic_partitions()
    if version >= 2 and not r.at_end():
        generation = r.i32()
    if version >= 3 and not r.at_end():
        rack = r.string()
    return ConsumerSubscription(version, topics, user_data, owned, generation, rack)


def decode_assignment(data: bytes) -> ConsumerAssignment:
    r = _Reader(data)
    version = _version(r)
    partitions = r.topic_partitions()
    user_data = r.nullable_bytes() if not r.at_end() else None
    return ConsumerAssignment(version, partitions, user_data)


def encode_subscription(sub: ConsumerSubscription) -> bytes:
    """`ConsumerProtocol.serializeSubscription`: the fields of `sub.version` (0-3)."""
    version = min(max(sub.version, 0), HIGHEST_VERSION)
    parts = [struct.pack(">hi", version, len(sub.topics))]
    parts.extend(_string(t) for t in sub.topics)
    parts.append(_nullable_bytes(sub.user_data))
    if version >= 1:
        parts.append(_topic_partitions(sub.owned_partitions))
    if version >= 2:
        parts.append(struct.pack(">i", sub.generation_id))
    if version >= 3:
        parts.append(_string(sub.rack_id))
    return b"".join(parts)


def encode_assignment(partitions: Mapping[str, Iterable[int]], version: int) -> bytes:
    """`ConsumerProtocol.serializeAssignment` of an assignment without user data."""
    return b"".join((
        struct.pack(">h", min(max(version, 0), HIGHEST_VERSION)),
        _topic_partitions(tuple((t, tuple(sorted(partitions[t]))) for t in sorted(partitions))),
        _nullable_bytes(None),
    ))


def _string(v: str | None) -> bytes:
    if v is None:
        return struct.pack(">h", -1)
    b = v.encode()
    return struct.pack(">h", len(b)) + b


def _nullable_bytes(v: bytes | None) -> bytes:
    return struct.pack(">i", -1) if v is None else struct.pack(">i", len(v)) + v


def _topic_partitions(tps: tuple[tuple[str, tuple[int, ...]], ...]) -> bytes:
    parts = [struct.pack(">i", len(tps))]
    for topic, ps in tps:
        parts.append(_string(topic) + struct.pack(f">i{len(ps)}i", len(ps), *ps))
    return b"".join(parts)


def subscribed_topics(metadata: bytes) -> set[str]:
    """Topics of one subscription; an unparsable one counts as subscribing to nothing."""
    try:
        return set(decode_subscription(metadata).topics)
    except ConsumerProtocolError:
        return set()
