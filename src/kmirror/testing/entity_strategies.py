"""Hypothesis strategies for any value of a kio-style entity class (kio's schemas, Fetch v19 and
the KIP-1279 RPCs), drawn from its dataclass fields: each field's `kafka_type` gives the value
range, nested entities and arrays recurse, nullable fields may be None.

Two domains: `readable` values are those kio's reader returns as written (the round-trip tests:
no zero UUID, which reads back as None, no negative durations, tagged fields never None); the
full domain also draws those and tagged fields at their default (which are not written), for
tests that compare two writers. Strategies are built once per class and domain: Hypothesis
computes each strategy's properties when first drawn, which dominated these tests' time when
every draw built new ones.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import types
import uuid
from typing import Any, Union, get_args, get_origin

from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial._implicit_defaults import get_tagged_field_default

_RANGES = {"int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
           "int64": (-(2**63), 2**63 - 1), "uint8": (0, 2**8 - 1), "uint16": (0, 2**16 - 1),
           "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1)}


def _ms(low: int, high: int) -> st.SearchStrategy[datetime.timedelta]:
    return st.integers(low, high).map(lambda ms: datetime.timedelta(milliseconds=ms))


@functools.cache
def primitive(kafka_type: str, readable: bool) -> st.SearchStrategy[Any]:
    if kafka_type in _RANGES:
        return st.integers(*_RANGES[kafka_type])
    least_ms = 0 if readable else -1000
    strategies: dict[str, st.SearchStrategy[Any]] = {
        "string": st.text(max_size=8),
        "bytes": st.binary(max_size=16),
        "records": st.binary(max_size=16),
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "uuid": st.uuids().filter(lambda u: u.int != 0) if readable else st.uuids() | st.just(uuid.UUID(int=0)),
        "error_code": st.sampled_from(list(ErrorCode)),
        "timedelta_i32": _ms(least_ms, 2**31 - 1),
        "timedelta_i64": _ms(least_ms, 2**40),
        "datetime_i64": st.integers(0, 2**41).map(
            lambda ms: datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)),
    }
    return strategies[kafka_type]


def _optional(tp: Any) -> tuple[Any, bool]:
    if get_origin(tp) in (types.UnionType, Union):
        return next(a for a in get_args(tp) if a is not type(None)), True
    return tp, False


def _is_entity(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _for_field(f: dataclasses.Field[Any], readable: bool) -> st.SearchStrategy[Any]:
    inner, nullable = _optional(f.type)
    tagged = "tag" in f.metadata
    if get_origin(inner) is tuple:
        elem = get_args(inner)[0]
        item = entities(elem, readable) if _is_entity(elem) else primitive(f.metadata["kafka_type"], readable)
        s: st.SearchStrategy[Any] = st.lists(item, max_size=3).map(tuple)
    elif _is_entity(inner):
        s = entities(inner, readable)
    else:
        s = primitive(f.metadata["kafka_type"], readable)
    if tagged and not readable:  # a tagged field at its default (or kio's implicit one) is not written
        s = st.just(f.default if f.default is not dataclasses.MISSING else get_tagged_field_default(f)) | s
    if nullable and not (tagged and readable):
        s = st.none() | s
    return s


@functools.cache
def entities(cls: Any, readable: bool = True) -> st.SearchStrategy[Any]:
    """Any value of the entity class `cls` (`readable`: only values kio reads back as written)."""
    return st.deferred(lambda: st.builds(cls, **{f.name: _for_field(f, readable) for f in dataclasses.fields(cls)}))
