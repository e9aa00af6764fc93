from uuid import UUID

from kmirror.kip1279 import state_records as wire
from kmirror.kip1279.state import MirrorPartitionState
from kmirror.mirror.coordinator.codec import decode_records, encode_record, encode_records
from kmirror.mirror.coordinator.records import MirrorPartitionKey, MirrorPartitionStateValue

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
