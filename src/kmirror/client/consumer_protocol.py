"""The partitions of a classic member's assignment, as DescribeGroups returns it: the `consumer`
embedded protocol's `ConsumerProtocolAssignment` (Kafka `ConsumerProtocol.deserializeAssignment`),
sans-IO. Non-flexible encoding: int16 version, then an int32-counted array of (int16-length topic
name, int32-counted int32 partitions); the user data after it is not read. Every version (0-3)
starts the same way, so a newer version is read as the highest known, as Kafka does."""

from __future__ import annotations

import struct

from kmirror.client.errors import KafkaProtocolError
from kmirror.types import TopicPartition


def assigned_partitions(assignment: bytes) -> frozenset[TopicPartition]:
    """The assigned partitions; none for an empty assignment (a member of a group not yet
    Stable). KafkaProtocolError for bytes that are not a `consumer` protocol assignment."""
    if not assignment:
        return frozenset()
    try:
        (version,) = struct.unpack_from(">h", assignment, 0)
        if version < 0:
            raise KafkaProtocolError(f"consumer protocol assignment of unknown version {version}")
        pos = 2
        (topics,) = struct.unpack_from(">i", assignment, pos)
        pos += 4
        out: set[TopicPartition] = set()
        for _ in range(_count(topics, assignment)):
            (length,) = struct.unpack_from(">h", assignment, pos)
            pos += 2
            if length < 0 or pos + length > len(assignment):
                raise KafkaProtocolError("consumer protocol assignment with an invalid topic name")
            topic = assignment[pos:pos + length].decode()
            pos += length
            (partitions,) = struct.unpack_from(">i", assignment, pos)
            pos += 4
            n = _count(partitions, assignment)
            out.update(TopicPartition(topic, p) for p in struct.unpack_from(f">{n}i", assignment, pos))
            pos += 4 * n
    except (struct.error, UnicodeDecodeError) as exc:
        raise KafkaProtocolError(f"undecodable consumer protocol assignment: {exc}") from exc
    return frozenset(out)


def _count(n: int, buf: bytes) -> int:
    if n < 0 or n > len(buf):
        raise KafkaProtocolError(f"consumer protocol assignment with an invalid array length {n}")
    return n
