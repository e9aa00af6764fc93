import pytest

from kmirror.coordinator.group.group import OffsetAndMetadata
from kmirror.coordinator.offsets.partitioner import java_string_hashcode, partition_for
from kmirror.coordinator.offsets.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitKey,
    RecordFormatError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)


def test_offset_commit_key_layout():
    assert encode_offset_commit_key(OffsetCommitKey("g", "t", 7)) == bytes.fromhex("0001" "000167" "000174" "00000007")


def test_group_metadata_key_layout():
    assert encode_group_metadata_key(GroupMetadataKey("grp")) == bytes.fromhex("0002" "0003677270")


def test_offset_commit_value_v3_layout():
    value = OffsetAndMetadata(offset=5, leader_epoch=1, metadata="", commit_timestamp_ms=1000)
    assert encode_offset_commit_value(value) == bytes.fromhex(
        "0003" "0000000000000005" "00000001" "0000" "00000000000003e8"
    )


def test_offset_commit_value_with_an_expire_timestamp_is_v1_as_kafka_writes_it():
    value = OffsetAndMetadata(offset=5, leader_epoch=-1, metadata="md", commit_timestamp_ms=1000,
                              expire_timestamp_ms=4000)
    encoded = encode_offset_commit_value(value)
    assert encoded == bytes.fromhex("0001" "0000000000000005" "00026d64" "00000000000003e8" "0000000000000fa0")
    assert decode_offset_commit_value(encoded) == value


def test_group_metadata_value_v3_layout():
    value = GroupMetadataValue(
        "consumer", 2, "range", "m", 9,
        (MemberRecord("m", None, "c", "h", 300, 100, b"\x01", b""),),
    )
    expected = bytes.fromhex(
        "0003" "0008" + b"consumer".hex() + "00000002" "0005" + b"range".hex() + "00016d" "0000000000000009"
        "00000001" "00016d" "ffff" "000163" "000168" "0000012c" "00000064" "0000000101" "00000000"
    )
    assert encode_group_metadata_value(value) == expected


def test_decode_older_versions():
    # OffsetCommitValue v1: offset, metadata, commit_timestamp, expire_timestamp.
    v1 = bytes.fromhex("0001" "000000000000000a" "00026d64" "0000000000000001" "ffffffffffffffff")
    assert decode_offset_commit_value(v1) == OffsetAndMetadata(10, -1, "md", 1)  # -1: no expire timestamp
    # GroupMetadataValue v0: no rebalance timeout, timestamp or instance id.
    v0 = bytes.fromhex(
        "0000" "0001" + b"c".hex() + "00000001" "ffff" "ffff" "00000001" "00016d" "000163" "000168" "00000064"
        "00000000" "00000000"
    )
    decoded = decode_group_metadata_value(v0)
    assert decoded.members[0].session_timeout_ms == 100 and decoded.members[0].rebalance_timeout_ms == 100
    assert decoded.current_state_timestamp_ms == -1 and decoded.protocol is None


def test_decode_key_types():
    assert decode_key(encode_offset_commit_key(OffsetCommitKey("g", "t", 1))) == OffsetCommitKey("g", "t", 1)
    assert decode_key(encode_group_metadata_key(GroupMetadataKey("g"))) == GroupMetadataKey("g")
    assert decode_key(bytes.fromhex("0003" "0001" "67")) is None  # a newer record type: skipped


def test_truncated_value_is_an_error():
    with pytest.raises(RecordFormatError):
        decode_offset_commit_value(bytes.fromhex("0003" "0000"))
    with pytest.raises(RecordFormatError):
        decode_group_metadata_value(bytes.fromhex("0009"))


@pytest.mark.parametrize(
    ("s", "h"),
    [("", 0), ("g", 103), ("hello", 99162322), ("polygenelubricants", -(2**31)), ("é", 233), ("😀", 0xD83D * 31 + 0xDE00)],
)
def test_java_string_hashcode(s, h):
    assert java_string_hashcode(s) == h


def test_partition_for_uses_kafka_utils_abs():
    # Integer.MIN_VALUE & 0x7fffffff == 0, unlike Math.abs.
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("g", 50) == 103 % 50
    assert partition_for("hello", 7) == 99162322 % 7
