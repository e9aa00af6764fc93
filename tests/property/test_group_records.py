from hypothesis import given
from hypothesis import strategies as st

from kmirror.coordinator.group.group import OffsetAndMetadata
from kmirror.coordinator.offsets.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberRecord,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)

text = st.text(max_size=20)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)


@given(text, text, i32)
def test_offset_commit_key_round_trip(group, topic, partition):
    key = OffsetCommitKey(group, topic, partition)
    assert decode_key(encode_offset_commit_key(key)) == key


@given(text)
def test_group_metadata_key_round_trip(group):
    assert decode_key(encode_group_metadata_key(GroupMetadataKey(group))) == GroupMetadataKey(group)


@given(i64, i32, text, i64)
def test_offset_commit_value_round_trip(offset, epoch, metadata, ts):
    value = OffsetAndMetadata(offset, epoch, metadata, ts)
    assert decode_offset_commit_value(encode_offset_commit_value(value)) == value


@given(i64, text, i64, i64.filter(lambda t: t != -1))
def test_offset_commit_value_with_an_expire_timestamp_round_trip(offset, metadata, ts, expire):
    value = OffsetAndMetadata(offset, -1, metadata, ts, expire)  # value v1 has no leader epoch; -1 is no expiry
    assert decode_offset_commit_value(encode_offset_commit_value(value)) == value


members = st.builds(MemberRecord, text, st.none() | text, text, text, i32, i32, st.binary(max_size=30), st.binary(max_size=30))


@given(st.builds(GroupMetadataValue, text, i32, st.none() | text, st.none() | text, i64, st.lists(members, max_size=4).map(tuple)))
def test_group_metadata_value_round_trip(value):
    assert decode_group_metadata_value(encode_group_metadata_value(value)) == value
