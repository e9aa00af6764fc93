"""Requests kio would decode into something a handler trips over, or that would make kio's
native reader abort the process, are refused as MalformedRequest."""

from __future__ import annotations

import io
import random
import struct

import pytest
from kio.serial import entity_reader, entity_writer

from kmirror.broker.api import build_registry
from kmirror.protocol.codec import MalformedRequest, decode_request
from kmirror.protocol.length_guard import ImplausibleLength, check_lengths
from kmirror.testing.fuzz import mutate_entity, seed_entity

REGISTRY = build_registry(plane="broker")


def test_a_compact_array_longer_than_the_frame_is_malformed_not_an_abort() -> None:
    # Metadata v12, topics declared with 2^37 elements: kio alone aborts the process
    frame = struct.pack(">hhih", 3, 12, 1, 1) + b"f" + b"\x00" + bytes.fromhex("a5a4c5f34a")
    with pytest.raises(MalformedRequest, match="array of"):
        decode_request(REGISTRY, frame)


@pytest.mark.parametrize(("frame", "field"), [
    (struct.pack(">hhih", 2, 1, 1, -1) + struct.pack(">ii", -1, -1), "ListOffsetsRequest.topics"),
    (struct.pack(">hhih", 0, 3, 1, -1) + struct.pack(">hhii", -1, 1, 1000, -1), "ProduceRequest.topic_data"),
    (struct.pack(">hhih", 0, 3, 1, -1) + struct.pack(">hhiih", -1, 1, 1000, 1, 1) + b"t" + struct.pack(">i", -1),
     "ProduceRequest.topic_data[].partition_data"),
])
def test_null_for_a_non_nullable_field_is_malformed(frame: bytes, field: str) -> None:
    with pytest.raises(MalformedRequest, match=f"non-nullable field {field.replace('[', '.').replace(']', '.')}"):
        decode_request(REGISTRY, frame)


def test_length_guard_agrees_with_kio_on_every_api_and_version() -> None:
    rng = random.Random(7)
    checked = 0
    for spec in REGISTRY:
        for version in range(spec.min_version, spec.max_version + 1):
            request_type = spec.request_type(version)
            for i in range(5):
                entity = seed_entity(request_type)
                if i:
                    entity = mutate_entity(entity, rng)
                buf = io.BytesIO()
                try:
                    entity_writer(request_type)(buf, entity)
                except (ValueError, TypeError, OverflowError):
                    continue
                data = buf.getvalue()
                assert check_lengths(request_type, data, 0) == entity_reader(request_type)(data, 0)[1]
                checked += 1
                if len(data) > 1:
                    try:
                        check_lengths(request_type, data[:-1], 0)
                    except ImplausibleLength:
                        pass
    assert checked > 500
