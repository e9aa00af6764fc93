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


def java_objects_hash(mirror_name: str, topic_id: UUID, partition: int) -> int:
    """Java `Objects.hash(mirrorName, topicId, partition)`."""
    result = 1
    for element_hash in (java_string_hashcode(mirror_name), kafka_uuid_hashcode(topic_id), _int32(partition)):
        result = _int32(31 * result + element_hash)
    return result


def partition_for(mirror_name: str, topic_id: UUID, partition: int, num_partitions: int) -> int:
    """The `__mirror_state` partition holding this mirror partition's state."""
    return java_utils_abs(java_objects_hash(mirror_name, topic_id, partition)) % num_partitions


def metadata_partition_for(mirror_name: str, num_partitions: int) -> int:
    """The `__mirror_state` partition whose leader runs metadata sync for the mirror."""
    return java_utils_abs(java_string_hashcode(mirror_name)) % num_partitions
