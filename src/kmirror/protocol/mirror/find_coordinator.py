"""FindCoordinator for the MirrorCoordinator (KIP-1279 "CoordinatorType", thread AS3).

Key type MIRROR = 3 (2 is SHARE); no schema change. The KIP distributes coordination by the
composite key (mirror name, topic id, partition) but does not say how it is spelled as a
FindCoordinator key string. kmirror spells it `<mirror name>:<topic id>:<partition>` with the
topic id in Kafka's base64 form; ':' is illegal in mirror names, and the key is parsed from
the right.
"""

import base64
import uuid
from dataclasses import dataclass

MIRROR_COORDINATOR_TYPE = 3


class InvalidMirrorCoordinatorKey(ValueError):
    pass


def topic_id_string(topic_id: uuid.UUID) -> str:
    """Kafka's `Uuid.toString()`: URL-safe base64 of the 16 bytes, no padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def parse_topic_id(text: str) -> uuid.UUID:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError as e:
        raise InvalidMirrorCoordinatorKey(f"invalid topic id {text!r}") from e
    if len(raw) != 16:
        raise InvalidMirrorCoordinatorKey(f"invalid topic id {text!r}")
    return uuid.UUID(bytes=raw)


@dataclass(frozen=True, slots=True)
class MirrorCoordinatorKey:
    mirror_name: str
    topic_id: uuid.UUID
    partition: int

    def __str__(self) -> str:
        return f"{self.mirror_name}:{topic_id_string(self.topic_id)}:{self.partition}"

    @classmethod
    def parse(cls, text: str) -> "MirrorCoordinatorKey":
        head, sep, partition = text.rpartition(":")
        mirror_name, sep2, topic_id = head.rpartition(":")
        if not sep or not sep2 or not mirror_name or not partition.isdigit():
            raise InvalidMirrorCoordinatorKey(f"invalid mirror coordinator key {text!r}")
        return cls(mirror_name, parse_topic_id(topic_id), int(partition))
