"""Which `__mirror_state` partition coordinates a mirror partition (KIP-1279: "composite
key (mirror name, topic id, and partition number)", "hash(mirrorName, topicId, partition)
% numPartitions").

The KIP names the hash inputs but not the function. kmirror uses what the Java reference
would write for a composite key, `Objects.hash(mirrorName, topicId, partition)` (Java's
`Arrays.hashCode` over String.hashCode, Kafka `Uuid.hashCode` and the int), made
non-negative with Kafka's `Utils.abs`, like the group coordinator's `partitionFor`.
Metadata synchronization is coordinated per mirror, "based on the mirror name alone":
`Utils.abs(mirrorName.hashCode()) % numPartitions`.
"""

from __future__ import annotations

import functools
from uuid import UUID

from kmirror.coordinator.offsets.partitioner import java_string_hashcode, java_utils_abs


def _int32(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n & 0x80000000 else n


def kafka_uuid_hashcode(topic_id: UUID) -> int:
    """Kafka `Uuid.hashCode`: `h = msb ^ lsb; (int) (h >> 32) ^ (int) h`."""
    value = topic_id.int
    h = (value >> 64) ^ (value & 0xFFFFFFFFFFFFFFFF)
    return _int32((h >> 32) ^ h)


@functools.lru_cache(maxsize=4096)
def _topic_hash(mirror_name: str, topic_id: UUID) -> int:
    """`Objects.hash` over the first two elements: the same for every partition of a topic
    (a describe or a pass of a 10,000-partition topic asks for every partition)."""
    return _int32(31 * _int32(31 + java_string_hashcode(mirror_name)) + kafka_uuid_hashcode(topic_id))


def java_objects_hash(mirror_name: str, topic_id: UUID, partition: int) -> int:
    """Java `Objects.hash(mirrorName, topicId, partition)`: `31 * (31 * (31 + h(name)) + h(id)) + partition`
    in 32-bit arithmetic."""
    return _int32(31 * _topic_hash(mirror_name, topic_id) + _int32(partition))


def partition_for(mirror_name: str, topic_id: UUID, partition: int, num_partitions: int) -> int:
    """The `__mirror_state` partition holding this mirror partition's state."""
    return java_utils_abs(java_objects_hash(mirror_name, topic_id, partition)) % num_partitions


def metadata_partition_for(mirror_name: str, num_partitions: int) -> int:
    """The `__mirror_state` partition whose leader runs metadata sync for the mirror."""
    return java_utils_abs(java_string_hashcode(mirror_name)) % num_partitions
