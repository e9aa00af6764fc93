"""The `consumer` embedded protocol's subscription (Kafka `ConsumerProtocolSubscription`):
int16 version, then an int32-counted array of int16-length topic names (all versions
start this way). The coordinator reads it only for OffsetDelete (KIP-496)."""

from __future__ import annotations

import struct

from kmirror.coordinator.group.group import ClassicGroup

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscribed_topics(metadata: bytes) -> set[str]:
    """Topics of one subscription; an unparsable one counts as subscribing to nothing."""
    try:
        (count,) = struct.unpack_from(">i", metadata, 2)
        pos = 6
        topics = set()
        for _ in range(max(0, count)):
            (n,) = struct.unpack_from(">h", metadata, pos)
            pos += 2
            topics.add(metadata[pos : pos + n].decode())
            pos += n
        return topics
    except (struct.error, UnicodeDecodeError):
        return set()


def group_subscribed_topics(group: ClassicGroup) -> set[str] | None:
    """Every member's subscribed topics, or None when the group is not a consumer group."""
    if group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    topics: set[str] = set()
    for member in group.members.values():
        topics |= subscribed_topics(member.metadata_for(group.protocol_name))
    return topics
