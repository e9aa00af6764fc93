"""Round-trips of every KIP-1279 entity through kio's writer and native reader, with values
drawn from the entity's own dataclass fields (kafka_type -> value range)."""

import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer

from kmirror.kip1279 import state_records
from kmirror.protocol.mirror import create_topics, fetch
from kmirror.protocol.mirror.registry import MIRROR_APIS, entity_types
from kmirror.records import mirror_pid_reset as pid_reset
from kmirror.testing.entity_strategies import entities


def _round_trip(cls: Any, value: Any) -> None:
    buf = io.BytesIO()
    entity_writer(cls)(buf, value)
    data = buf.getvalue()
    decoded, size = entity_reader(cls)(data, 0)
    assert size == len(data)
    assert decoded == value


MIRROR_ENTITIES = [t for key in MIRROR_APIS for t in entity_types(key)]


@pytest.mark.parametrize("cls", MIRROR_ENTITIES, ids=lambda c: c.__name__)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_mirror_rpc_round_trip(cls: Any, data: st.DataObject) -> None:
    _round_trip(cls, data.draw(entities(cls)))


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_fetch_v19_partition_round_trip(data: st.DataObject) -> None:
    _round_trip(fetch.FetchPartition, data.draw(entities(fetch.FetchPartition)))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_fetch_v19_response_partition_round_trip(data: st.DataObject) -> None:
    _round_trip(fetch.PartitionData, data.draw(entities(fetch.PartitionData)))


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_create_topics_v8_topic_round_trip(data: st.DataObject) -> None:
    _round_trip(create_topics.CreatableTopic, data.draw(entities(create_topics.CreatableTopic)))


STATE_KEYS = [state_records.LastMirrorEpochsKey, state_records.MirrorPartitionStateKey]
STATE_VALUES = [state_records.LastMirrorEpochsValue, state_records.MirrorPartitionStateValue]


@pytest.mark.parametrize("key_cls,value_cls", list(zip(STATE_KEYS, STATE_VALUES, strict=True)))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_mirror_state_record_round_trip(key_cls: Any, value_cls: Any, data: st.DataObject) -> None:
    key = data.draw(entities(key_cls))
    value = data.draw(st.none() | entities(value_cls))
    assert state_records.decode(state_records.encode_key(key), state_records.encode_value(value)) == (key, value)


@given(st.text(max_size=40))
def test_mirror_pid_reset_round_trip(cluster_id: str) -> None:
    encoded = pid_reset.encode_mirror_pid_reset(cluster_id)
    assert pid_reset.decode_mirror_pid_reset(encoded).source_cluster_id == cluster_id


@given(st.binary(max_size=40))
def test_mirror_state_decoding_garbage_fails_cleanly(data: bytes) -> None:
    try:
        state_records.decode(data, data)
    except state_records.MirrorStateRecordError:
        pass
