"""Requests kio would decode into something a handler trips over, or that would make kio's
native reader abort the process, are refused as MalformedRequest."""

from __future__ import annotations

import dataclasses
import io
import random
import struct

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from kmirror.broker.api import build_registry
from kmirror.protocol.codec import MalformedRequest, decode_request
from kmirror.protocol.length_guard import ImplausibleLength, check_lengths
from kmirror.protocol.mirror.registry import MIRROR_APIS, entity_types
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


def _nullify_structs(entity: object, rng: random.Random) -> object:
    changes = {f.name: None for f in dataclasses.fields(entity)
               if dataclasses.is_dataclass(getattr(entity, f.name)) and "None" in str(f.type) and rng.random() < 0.5}
    return dataclasses.replace(entity, **changes) if changes else entity


def _entity_types() -> list[type]:
    types: list[type] = []
    for load in (load_request_schema, load_response_schema):
        for key in range(0, 90):
            for version in range(0, 20):
                try:
                    types.append(load(key, version))
                except Exception:
                    continue
    for key in MIRROR_APIS:
        types.extend(entity_types(key))
    return types


def test_length_guard_agrees_with_kio_on_every_request_and_response() -> None:
    """Every kio request and response schema (and the KIP-1279 RPCs), with boundary values,
    empty and repeated arrays and null structs: the guard ends where kio's decoder ends."""
    rng = random.Random(7)
    checked = 0
    for entity_type in _entity_types():
        for i in range(6):
            entity = seed_entity(entity_type)
            if i:
                entity = mutate_entity(entity, rng)
            if i > 3:
                entity = _nullify_structs(entity, rng)
            buf = io.BytesIO()
            try:
                entity_writer(entity_type)(buf, entity)
            except (ValueError, TypeError, OverflowError):
                continue
            data = buf.getvalue()
            assert check_lengths(entity_type, data, 0) == entity_reader(entity_type)(data, 0)[1], entity_type
            checked += 1
            if len(data) > 1:
                try:
                    check_lengths(entity_type, data[:-1], 0)
                except ImplausibleLength:
                    pass
    assert checked > 3000
