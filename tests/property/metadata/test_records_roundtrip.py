import uuid

from hypothesis import given
from hypothesis import strategies as st

from kmirror.metadata import records as r

ids = st.integers(min_value=-1, max_value=2**31 - 1)
longs = st.integers(min_value=-(2**63), max_value=2**63 - 1)
uuids = st.uuids()
text = st.text(max_size=40)
replicas = st.lists(st.integers(0, 1000), max_size=6).map(tuple)

RECORDS = st.one_of(
    st.builds(
        r.RegisterBrokerRecord,
        broker_id=ids,
        incarnation_id=uuids,
        broker_epoch=longs,
        endpoints=st.lists(st.builds(r.BrokerEndpoint, text, text, st.integers(0, 65535), st.integers(0, 3)), max_size=3).map(tuple),
        rack=st.none() | text,
        fenced=st.booleans(),
    ),
    st.builds(r.UnregisterBrokerRecord, ids, longs),
    st.builds(r.TopicRecord, text, uuids),
    st.builds(r.PartitionRecord, ids, uuids, replicas, replicas, ids, ids, ids, replicas, replicas),
    st.builds(r.ConfigRecord, st.integers(0, 32), text, text, st.none() | text),
    st.builds(r.PartitionChangeRecord, ids, uuids, st.none() | replicas, st.integers(-2, 100), st.none() | replicas),
    st.builds(r.FenceBrokerRecord, ids, longs),
    st.builds(r.UnfenceBrokerRecord, ids, longs),
    st.builds(r.BrokerRegistrationChangeRecord, ids, longs, st.integers(0, 1)),
    st.builds(r.RemoveTopicRecord, uuids),
    st.builds(r.FeatureLevelRecord, text, st.integers(0, 2**15 - 1)),
    st.builds(r.ProducerIdsRecord, ids, longs, longs),
    st.just(r.NoOpRecord()),
    st.builds(r.AccessControlEntryRecord, uuids, st.integers(0, 7), text, st.integers(0, 4), text, text,
              st.integers(0, 14), st.integers(0, 3)),
    st.builds(r.RemoveAccessControlEntryRecord, uuids),
    st.builds(r.ClusterIdRecord, text),
)


@given(RECORDS)
def test_encode_decode_round_trip(record: r.Record) -> None:
    data = r.encode(record)
    assert data[0] == r.FRAME_VERSION
    assert r.decode(data) == record


@given(RECORDS, st.integers(min_value=0, max_value=4))
def test_truncated_frames_are_rejected(record: r.Record, keep: int) -> None:
    data = r.encode(record)
    try:
        decoded = r.decode(data[:keep])
    except r.CorruptMetadataRecordError:
        return
    raise AssertionError(f"decoded {decoded!r} from a {keep}-byte prefix")


def test_unknown_type_is_corrupt() -> None:
    data = bytearray(r.encode(r.TopicRecord("t", uuid.uuid4())))
    data[1:3] = (999).to_bytes(2, "big")
    try:
        r.decode(bytes(data))
    except r.CorruptMetadataRecordError as e:
        assert "999" in str(e)
    else:
        raise AssertionError("decoded an unknown record type")
