import uuid

import pytest

from kmirror.kip1279 import state_records as S
from kmirror.kip1279.state import MirrorPartitionState
from kmirror.metadata.mirror_records import mirror_config_records, mirror_version_record
from kmirror.metadata.records import ConfigRecord, FeatureLevelRecord
from kmirror.protocol.mirror.find_coordinator import (
    MIRROR_COORDINATOR_TYPE,
    InvalidMirrorCoordinatorKey,
    MirrorCoordinatorKey,
)
from kmirror.records import mirror_pid_reset as pid_reset
from kmirror.records.control import ControlType, parse_control_key


def test_last_mirror_epochs_key_matches_the_kips_dump_size() -> None:
    # The KIP's dump: key {"type":"..","data":{"mirrorName":"my-mirror"}} has keySize 13.
    key = S.encode_key(S.LastMirrorEpochsKey(mirror_name="my-mirror"))
    assert key == b"\x00\x01" + b"\x00\x09my-mirror" and len(key) == 13


def test_partition_state_value_layout_matches_the_kips_dump_size() -> None:
    # The KIP's dump: payload {"topicName":"my-topic","partition":0,"state":1} has valueSize 17.
    value = S.encode_value(S.MirrorPartitionStateValue(topic_name="my-topic", partition=0, state=1))
    assert value == b"\x00\x00" + b"\x09my-topic" + b"\x00\x00\x00\x00" + b"\x01" + b"\x00"
    assert value is not None and len(value) == 17


def test_partition_state_key_is_the_composite_coordinator_key() -> None:
    topic_id = uuid.UUID(int=7)
    key = S.MirrorPartitionStateKey(mirror_name="m", topic_id=topic_id, partition=3)
    encoded = S.encode_key(key)
    assert encoded == b"\x00\x02" + b"\x00\x01m" + topic_id.bytes + b"\x00\x00\x00\x03"
    assert S.record_type(encoded) == S.MIRROR_PARTITION_STATE_TYPE
    assert S.decode(encoded, None) == (key, None)


def test_partition_state_value_carries_the_lme_as_tag_0() -> None:
    plain = S.MirrorPartitionStateValue(topic_name="t", partition=0, state=4)
    with_lme = S.MirrorPartitionStateValue(topic_name="t", partition=0, state=4, last_mirror_epoch=7)
    plain_bytes, lme_bytes = S.encode_value(plain), S.encode_value(with_lme)
    assert plain_bytes is not None and lme_bytes is not None
    assert lme_bytes == plain_bytes[:-1] + b"\x01\x00\x04\x00\x00\x00\x07"
    assert S.decode_value(S.MIRROR_PARTITION_STATE_TYPE, lme_bytes) == with_lme


def test_last_mirror_epochs_value_layout() -> None:
    value = S.LastMirrorEpochsValue(topics=(S.LastMirrorEpochsTopic(
        name="t", partitions=(S.LastMirrorEpochsPartition(partition_index=1, last_mirror_epoch=9),)),))
    encoded = S.encode_value(value)
    assert encoded == b"\x00\x00" + b"\x02" + b"\x02t" + b"\x02" + b"\x00\x00\x00\x01\x00\x00\x00\x09\x00" + b"\x00" + b"\x00"
    assert S.decode_value(S.LAST_MIRROR_EPOCHS_TYPE, encoded) == value


@pytest.mark.parametrize("key,value", [
    (b"\x00\x09\x00\x01m", None),                          # unknown record type
    (b"\x00", None),                                       # shorter than the type prefix
    (b"\x00\x01\x00\x05ab", None),                         # truncated string
    (b"\x00\x01\x00\x01m", b"\x00\x01\x00"),               # unknown value version
    (b"\x00\x01\x00\x01mx", None),                         # trailing bytes
])
def test_undecodable_records_raise(key: bytes, value: bytes | None) -> None:
    with pytest.raises(S.MirrorStateRecordError):
        S.decode(key, value)


def test_state_codes() -> None:
    assert S.MirrorPartitionState is MirrorPartitionState
    assert [(s.name, int(s)) for s in MirrorPartitionState] == [
        ("UNKNOWN", -1), ("PREPARING", 0), ("MIRRORING", 1), ("PAUSING", 2), ("PAUSED", 3),
        ("STOPPING", 4), ("STOPPED", 5), ("FAILED", 6)]


def test_mirror_pid_reset_key_and_value_layout() -> None:
    assert parse_control_key(pid_reset.mirror_pid_reset_key()) is ControlType.MIRROR_PID_RESET
    assert pid_reset.mirror_pid_reset_key() == b"\x00\x00\x00\x07"
    value = pid_reset.encode_mirror_pid_reset("lBq12jYZRp-9wF3M9MPopg")
    assert value == b"\x00\x00" + b"\x17lBq12jYZRp-9wF3M9MPopg" + b"\x00"
    assert pid_reset.decode_mirror_pid_reset(value).source_cluster_id == "lBq12jYZRp-9wF3M9MPopg"


@pytest.mark.parametrize("value", [None, b"", b"\x00", b"\x00\x00\x05ab", b"\xff\xff\x01\x00"])
def test_bad_mirror_pid_reset_values_raise(value: bytes | None) -> None:
    with pytest.raises(pid_reset.InvalidMirrorPidResetRecord):
        pid_reset.decode_mirror_pid_reset(value)


def test_mirror_config_and_feature_records() -> None:
    assert mirror_config_records("m", {"security.protocol": None, "bootstrap.servers": "h:9092"}) == [
        ConfigRecord(resource_type=64, resource_name="m", name="bootstrap.servers", value="h:9092"),
        ConfigRecord(resource_type=64, resource_name="m", name="security.protocol", value=None)]
    assert mirror_version_record(1) == FeatureLevelRecord(name="mirror.version", feature_level=1)
    with pytest.raises(ValueError):
        mirror_version_record(2)


def test_mirror_coordinator_key() -> None:
    assert MIRROR_COORDINATOR_TYPE == 3
    key = MirrorCoordinatorKey("my-mirror", uuid.UUID(int=0x1234), 12)
    assert str(key) == "my-mirror:AAAAAAAAAAAAAAAAAAASNA:12"
    assert MirrorCoordinatorKey.parse(str(key)) == key
    for bad in ["m", "m:AAAAAAAAAAAAAAAAAAASNA", ":AAAAAAAAAAAAAAAAAAASNA:1", "m:xx:1", "m:AAAAAAAAAAAAAAAAAAASNA:-1"]:
        with pytest.raises(InvalidMirrorCoordinatorKey):
            MirrorCoordinatorKey.parse(bad)
