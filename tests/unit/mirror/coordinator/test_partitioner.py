from uuid import UUID

from kmirror.mirror.coordinator.partitioner import (
    java_objects_hash,
    kafka_uuid_hashcode,
    metadata_partition_for,
    partition_for,
)


def test_uuid_hashcode_like_kafka():
    assert kafka_uuid_hashcode(UUID(int=0)) == 0
    assert kafka_uuid_hashcode(UUID(int=1 << 64)) == 1  # msb=1, lsb=0
    # msb = lsb -> h = 0
    assert kafka_uuid_hashcode(UUID(int=(5 << 64) | 5)) == 0
    # h = 0xFFFFFFFF00000000 -> (int)(h>>32) ^ (int)h = -1 ^ 0 = -1
    assert kafka_uuid_hashcode(UUID(int=0xFFFFFFFF00000000)) == -1


def test_objects_hash_golden():
    # Arrays.hashCode(["", uuid0, 0]) = 31 * (31 * (31 + 0) + 0) + 0
    assert java_objects_hash("", UUID(int=0), 0) == 29791
    # "a".hashCode() = 97: 31 * (31 * (31 + 97) + 0) + 3
    assert java_objects_hash("a", UUID(int=0), 3) == 31 * 31 * 128 + 3
    assert partition_for("", UUID(int=0), 0, 50) == 29791 % 50


def test_int32_wraparound_and_non_negative():
    h = java_objects_hash("x" * 40, UUID(int=0xFFFFFFFF00000000), 2**31 - 1)
    assert -(2**31) <= h < 2**31
    for p in range(200):
        assert 0 <= partition_for("my-mirror", UUID(int=p * 7919), p, 50) < 50


def test_partitions_of_a_mirror_spread_over_coordinators():
    topic = UUID("5b1b0c6e-0f3c-4d8c-9d0a-6a3d3f0b9e11")
    assert len({partition_for("my-mirror", topic, p, 50) for p in range(100)}) > 10


def test_metadata_coordinator_uses_the_mirror_name_alone():
    # "my-mirror".hashCode() computed by hand with Java's rule
    h = 0
    for ch in "my-mirror":
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    assert metadata_partition_for("my-mirror", 50) == (h & 0x7FFFFFFF) % 50
