"""Which `__consumer_offsets` partition holds a group (Kafka `GroupCoordinatorService.partitionFor`)."""

from __future__ import annotations


def java_string_hashcode(s: str) -> int:
    """Java `String.hashCode` over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_utils_abs(n: int) -> int:
    """Kafka `Utils.abs`: `n & 0x7fffffff`, so Integer.MIN_VALUE maps to 0, not itself."""
    return n & 0x7FFFFFFF


def partition_for(group_id: str, num_partitions: int) -> int:
    return java_utils_abs(java_string_hashcode(group_id)) % num_partitions
