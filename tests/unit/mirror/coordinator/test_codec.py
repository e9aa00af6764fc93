from uuid import UUID

from kmirror.kip1279 import state_records as wire
from kmirror.kip1279.state import MirrorPartitionState
from kmirror.mirror.coordinator.codec import decode_records, encode_record, encode_records
from kmirror.mirror.coordinator.records import (
    ManagedAclsKey,
    ManagedAclsValue,
    MirrorPartitionKey,
    MirrorPartitionStateValue,
)

S = MirrorPartitionState
KEY = MirrorPartitionKey("my-mirror", UUID("5b1b0c6e-0f3c-4d8c-9d0a-6a3d3f0b9e11"), 3)


def test_round_trip_values_and_tombstones():
    records = [(KEY, MirrorPartitionStateValue("my-topic", S.PREPARING)),
               (KEY, MirrorPartitionStateValue("my-topic", S.STOPPED, 7)),
               (KEY, None)]
    assert list(decode_records(encode_records(records))) == records


def test_wire_fields():
    raw_key, raw_value = encode_record((KEY, MirrorPartitionStateValue("my-topic", S.MIRRORING, -1)))
    key, value = wire.decode(raw_key, raw_value)
    assert isinstance(key, wire.MirrorPartitionStateKey) and key.partition == 3
    assert isinstance(value, wire.MirrorPartitionStateValue)
    assert (value.topic_name, value.partition, value.state, value.last_mirror_epoch) == ("my-topic", 3, 1, -1)


def test_last_mirror_epochs_records_are_skipped():
    lme_key = wire.encode_key(wire.LastMirrorEpochsKey(mirror_name="my-mirror"))
    assert list(decode_records([(lme_key, None)])) == []


def test_managed_acls_round_trip_as_one_record_per_mirror():
    acls = frozenset({(2, "orders", 3, "User:alice", "*", 3, 3), (3, "app", 4, "User:bob", "10.0.0.1", 4, 2)})
    records = [(ManagedAclsKey("m"), ManagedAclsValue(acls)), (ManagedAclsKey("m"), ManagedAclsValue(frozenset())),
               (ManagedAclsKey("m"), None)]
    assert list(decode_records(encode_records(records))) == records
    raw_key, _ = encode_record(records[0])
    assert raw_key[:2] == wire.MIRROR_MANAGED_ACLS_TYPE.to_bytes(2, "big")
