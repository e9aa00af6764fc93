"""`kmirror.protocol.fast_writer` writes the bytes kio's `entity_writer` writes, for entities of
every request and response schema the client and the broker know (kio's, Fetch v19 and the
KIP-1279 RPCs), with values drawn from each field's `kafka_type` (`kmirror.testing.entity_strategies`)."""

import io
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import api_key_map
from kio.serial import entity_writer

from kmirror.client.protocol import kio_versions, request_schema, response_schema
from kmirror.protocol.fast_writer import encode, fast_writer
from kmirror.protocol.mirror.registry import MIRROR_APIS
from kmirror.testing.entity_strategies import entities


def _kio_bytes(cls: Any, value: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(cls)(buffer, value)
    return buffer.getvalue()


def _schemas(api_key: int) -> list[Any]:
    return [schema(api_key, v) for v in kio_versions(api_key) for schema in (request_schema, response_schema)]


API_KEYS = sorted({*api_key_map, *MIRROR_APIS, 1})


@pytest.mark.parametrize("api_key", API_KEYS)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_schema_writes_kios_bytes(api_key: int, data: st.DataObject) -> None:
    cls = data.draw(st.sampled_from(_schemas(api_key)))
    value = data.draw(entities(cls, readable=False))
    assert bytes(encode(value)) == _kio_bytes(cls, value), cls


def test_a_nullable_entity_writes_its_marker() -> None:
    from kmirror.protocol.mirror import fetch

    cls = fetch.EpochEndOffset
    out = bytearray()
    fast_writer(cls, nullable=True)(out, None)
    fast_writer(cls, nullable=True)(out, cls(epoch=3, end_offset=7))
    buffer = io.BytesIO()
    entity_writer(cls, nullable=True)(buffer, None)
    entity_writer(cls, nullable=True)(buffer, cls(epoch=3, end_offset=7))
    assert bytes(out) == buffer.getvalue()
