"""`kmirror.protocol.fast_writer` writes the bytes kio's `entity_writer` writes, for entities of
every request and response schema the client and the broker know (kio's, Fetch v19 and the
KIP-1279 RPCs), with values drawn from each field's `kafka_type`."""

import dataclasses
import datetime
import io
import types
import uuid
from typing import Any, Union, get_args, get_origin

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import api_key_map
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default

from kmirror.client.protocol import kio_versions, request_schema, response_schema
from kmirror.protocol.fast_writer import encode, fast_writer
from kmirror.protocol.mirror.registry import MIRROR_APIS

_RANGES = {"int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
           "int64": (-(2**63), 2**63 - 1), "uint8": (0, 2**8 - 1), "uint16": (0, 2**16 - 1),
           "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1)}


def _primitive(kafka_type: str) -> st.SearchStrategy[Any]:
    if kafka_type in _RANGES:
        return st.integers(*_RANGES[kafka_type])
    strategies: dict[str, st.SearchStrategy[Any]] = {
        "string": st.text(max_size=8),
        "bytes": st.binary(max_size=16),
        "records": st.binary(max_size=16),
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "uuid": st.uuids() | st.just(uuid.UUID(int=0)),
        "error_code": st.sampled_from(list(ErrorCode)),
        "timedelta_i32": st.integers(-1000, 2**31 - 1).map(lambda ms: datetime.timedelta(milliseconds=ms)),
        "timedelta_i64": st.integers(-1000, 2**40).map(lambda ms: datetime.timedelta(milliseconds=ms)),
        "datetime_i64": st.integers(0, 2**41).map(
            lambda ms: datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)),
    }
    return strategies[kafka_type]


def _optional(tp: Any) -> tuple[Any, bool]:
    if get_origin(tp) in (types.UnionType, Union):
        return next(a for a in get_args(tp) if a is not type(None)), True
    return tp, False


def _for_field(f: dataclasses.Field[Any]) -> st.SearchStrategy[Any]:
    inner, nullable = _optional(f.type)
    if get_origin(inner) is tuple:
        elem = get_args(inner)[0]
        item = entities(elem) if dataclasses.is_dataclass(elem) else _primitive(f.metadata["kafka_type"])
        s: st.SearchStrategy[Any] = st.lists(item, max_size=3).map(tuple)
    elif dataclasses.is_dataclass(inner):
        s = entities(inner)
    else:
        s = _primitive(f.metadata["kafka_type"])
    if "tag" in f.metadata:  # a tagged field at its default (or kio's implicit one) is not written
        s = st.just(f.default if f.default is not dataclasses.MISSING else get_tagged_field_default(f)) | s
    if nullable:
        s = st.none() | s
    return s


def entities(cls: Any) -> st.SearchStrategy[Any]:
    return st.deferred(lambda: st.builds(cls, **{f.name: _for_field(f) for f in dataclasses.fields(cls)}))


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
    value = data.draw(entities(cls))
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
