"""The `consumer` embedded protocol codec: round trips, and agreement with kio's codec
generated from Kafka's ConsumerProtocolSubscription / ConsumerProtocolAssignment schemas."""

from __future__ import annotations

import importlib
import io
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

from kmirror.protocol.consumer_protocol import (
    ConsumerProtocolError,
    ConsumerSubscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
    protocol_version,
    subscribed_topics,
)

names = st.text(max_size=8)
topic_partitions = st.lists(st.tuples(names, st.lists(st.integers(0, 2**31 - 1), max_size=4).map(tuple)),
                            max_size=3).map(tuple)
subscriptions = st.builds(
    ConsumerSubscription, st.integers(0, 3), st.lists(names, max_size=4).map(tuple),
    st.none() | st.binary(max_size=8), topic_partitions, st.integers(-1, 100), st.none() | names,
)


def _kio(kind: str, version: int) -> object:
    return importlib.import_module(f"kio.schema.consumer_protocol_{kind}.v{version}.data")


def _at_version(sub: ConsumerSubscription) -> ConsumerSubscription:
    """What a subscription keeps of its fields at its version."""
    return ConsumerSubscription(
        sub.version, sub.topics, sub.user_data,
        sub.owned_partitions if sub.version >= 1 else (),
        sub.generation_id if sub.version >= 2 else -1,
        sub.rack_id if sub.version >= 3 else None,
    )


@given(subscriptions)
def test_subscriptions_round_trip_and_read_as_kio_reads_them(sub):
    data = encode_subscription(sub)
    assert decode_subscription(data) == _at_version(sub)
    assert protocol_version(data) == sub.version
    module = _kio("subscription", sub.version)
    parsed, size = entity_reader(module.ConsumerProtocolSubscription)(data, 2)
    assert size == len(data) - 2  # all of it read (after the version)
    assert parsed.topics == sub.topics and parsed.user_data == sub.user_data
    if sub.version >= 1:
        assert tuple((tp.topic, tuple(tp.partitions)) for tp in parsed.owned_partitions) == sub.owned_partitions


@given(st.integers(0, 3), st.dictionaries(names, st.frozensets(st.integers(0, 1000), max_size=4), max_size=3))
def test_assignments_round_trip_and_read_as_kio_reads_them(version, partitions):
    data = encode_assignment(partitions, version)
    decoded = decode_assignment(data)
    assert decoded.version == version and decoded.user_data is None
    assert {t: frozenset(ps) for t, ps in decoded.partitions} == partitions
    module = _kio("assignment", version)
    parsed, size = entity_reader(module.ConsumerProtocolAssignment)(data, 2)
    assert size == len(data) - 2  # all of it read (after the version)
    assert {tp.topic: frozenset(tp.partitions) for tp in parsed.assigned_partitions} == partitions


def test_a_kio_written_subscription_is_read():
    module = _kio("subscription", 3)
    buf = io.BytesIO()
    buf.write(struct.pack(">h", 3))
    entity_writer(module.ConsumerProtocolSubscription)(buf, module.ConsumerProtocolSubscription(
        topics=("a", "b"), user_data=b"u", owned_partitions=(module.TopicPartition(topic="a", partitions=(i32(1),)),),
        generation_id=i32(7), rack_id="r"))
    assert decode_subscription(buf.getvalue()) == ConsumerSubscription(3, ("a", "b"), b"u", (("a", (1,)),), 7, "r")


def test_versions_above_the_highest_are_read_as_the_highest_and_negative_ones_refused():
    data = encode_subscription(ConsumerSubscription(3, ("t",), None, (), 4, "r"))
    assert decode_subscription(b"\x00\x09" + data[2:] + b"future fields") == ConsumerSubscription(
        3, ("t",), None, (), 4, "r")
    with pytest.raises(ConsumerProtocolError):
        decode_subscription(b"\xff\xff" + data[2:])
    with pytest.raises(ConsumerProtocolError):
        decode_assignment(b"\x00\x00\x00\x00\x00\x05\x00")  # five topics announced, none there
    assert subscribed_topics(b"\x00") == set()
