"""kio entities written with fewer Python calls: the bytes kio's `entity_writer` writes, built
once per entity class into a few closures.

kio's writer calls one Python function per field (and one more per length and varint),
each writing a few bytes to a BytesIO, and checks each value's range through its phantom
types: a one-partition Produce response cost about 15 us to encode, and a node answering
thousands of one-batch Produce and Fetch requests a second spends a good share of a core
there. Here the fixed-size fields that follow each other are packed with one
`struct.Struct`, arrays and strings are written inline into one `bytearray`, and the tagged
fields section is empty in one byte unless a tagged field differs from its default (kio's
rule), which is then written by kio's own field writer.

The layout rules are kio's (`kio.serial._serialize`; kio is pinned in pyproject.toml): a
test writes entities of every request and response schema with both writers and compares
the bytes. Out-of-range values raise `struct.error` or `OverflowError` (kio raises its
`OutOfBoundValue` for lengths, `struct.error` for values). `RequestHeader`, whose
`client_id` kio writes in the legacy format whatever the version, is left to kio.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import MISSING, Field, fields
from operator import attrgetter
from typing import Any

from kio.serial import entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.serial._serialize import get_field_writer
from kio.serial.writers import write_tagged_field
from kio.static.primitive import uvarint

Step = Callable[[bytearray, Any], None]

# kafka_type -> (struct code, conversion of the entity's value to what struct packs)
_FIXED: dict[str, tuple[str, Callable[[Any], Any] | None]] = {
    "int8": ("b", None), "int16": ("h", None), "int32": ("i", None), "int64": ("q", None),
    "uint8": ("B", None), "uint16": ("H", None), "uint32": ("I", None), "uint64": ("Q", None),
    "float64": ("d", None), "bool": ("?", None),
    "error_code": ("h", lambda v: v.value),
    "timedelta_i32": ("i", lambda v: round(v.total_seconds() * 1000)),
    "timedelta_i64": ("q", lambda v: round(v.total_seconds() * 1000)),
    "datetime_i64": ("q", lambda v: round(v.timestamp() * 1000)),
}
_NULLABLE_DATETIME = ("q", lambda v: -1 if v is None else round(v.timestamp() * 1000))
_ZERO_UUID = bytes(16)
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT8_NULL, _INT8_PRESENT = b"\xff", b"\x01"

_writers: dict[tuple[type, bool], Step] = {}


class Encoded(bytes):
    """An item of an entity array, already written: its bytes are copied as they are. For
    an item a handler answers again and again (an idle partition of a wide Fetch), encoded
    once with `encode_item`. Only items without an error are kept so (`error_code`, read by
    the request metrics' error counts)."""

    error_code = 0


def encode_item(entity: object) -> Encoded:
    return Encoded(encode(entity))


def fast_writer(entity_type: type, nullable: bool = False) -> Step:
    """`write(out, entity)`: appends to `out` what kio's `entity_writer(entity_type,
    nullable)` writes for `entity`."""
    key = (entity_type, nullable)
    writer = _writers.get(key)
    if writer is None:
        writer = _writers[key] = _build(entity_type, nullable)
    return writer


def encode(entity: object) -> bytearray:
    out = bytearray()
    fast_writer(type(entity))(out, entity)
    return out


def _uvarint(out: bytearray, value: int) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _build(entity_type: type, nullable: bool) -> Step:
    if entity_type.__name__ == "RequestHeader":
        kio_writer = entity_writer(entity_type, nullable)  # type: ignore[call-overload]

        def write_with_kio(out: bytearray, entity: Any) -> None:
            buffer = io.BytesIO()
            kio_writer(buffer, entity)
            out += buffer.getvalue()

        return write_with_kio
    flexible = bool(getattr(entity_type, "__flexible__"))  # noqa: B009 (set by kio on each class)
    steps: list[Step] = []
    run: list[tuple[str, str, Callable[[Any], Any] | None]] = []
    tagged: list[tuple[int, Field[Any]]] = []
    for f in fields(entity_type):
        tag = get_field_tag(f)
        if tag is not None:
            tagged.append((tag, f))
            continue
        fixed = _fixed(f)
        if fixed is not None:
            run.append((fixed[0], f.name, fixed[1]))
            continue
        if run:
            steps.append(_pack(run))
            run = []
        steps.append(_field_step(f, flexible))
    if run:
        steps.append(_pack(run))
    if flexible:
        steps.append(_tagged_step(sorted(tagged, key=lambda t: t[0]), flexible))

    def write(out: bytearray, entity: Any) -> None:
        for step in steps:
            step(out, entity)

    if not nullable:
        return write

    def write_nullable(out: bytearray, entity: Any) -> None:
        if entity is None:
            out += _INT8_NULL
        else:
            out += _INT8_PRESENT
            write(out, entity)

    return write_nullable


def _fixed(f: Field[Any]) -> tuple[str, Callable[[Any], Any] | None] | None:
    """The struct code of a fixed-size, non-array primitive field (None for any other)."""
    kind = classify_field(f)
    if not isinstance(kind, PrimitiveField):
        return None
    kafka_type = get_schema_field_type(f)
    if kafka_type == "datetime_i64" and is_optional(f):
        return _NULLABLE_DATETIME
    if is_optional(f):
        return None
    return _FIXED.get(kafka_type)


def _pack(run: list[tuple[str, str, Callable[[Any], Any] | None]]) -> Step:
    packer = struct.Struct(">" + "".join(code for code, _, _ in run))
    pack = packer.pack
    names = [name for _, name, _ in run]
    converters = [convert for _, _, convert in run]
    get = attrgetter(*names)
    if all(c is None for c in converters):
        if len(names) == 1:
            name = names[0]

            def pack_one(out: bytearray, entity: Any) -> None:
                out += pack(getattr(entity, name))

            return pack_one

        def pack_all(out: bytearray, entity: Any) -> None:
            out += pack(*get(entity))

        return pack_all
    single = len(names) == 1
    converted = [(i, c) for i, c in enumerate(converters) if c is not None]

    def pack_converted(out: bytearray, entity: Any) -> None:
        values = [get(entity)] if single else list(get(entity))
        for i, convert in converted:
            values[i] = convert(values[i])
        out += pack(*values)

    return pack_converted


def _field_step(f: Field[Any], flexible: bool) -> Step:
    name = f.name
    kind = classify_field(f)
    optional = is_optional(f)
    if isinstance(kind, EntityField):
        inner = fast_writer(kind.type_, nullable=optional)

        def write_entity(out: bytearray, entity: Any) -> None:
            inner(out, getattr(entity, name))

        return write_entity
    if isinstance(kind, EntityTupleField | PrimitiveTupleField):
        item = (fast_writer(kind.type_) if isinstance(kind, EntityTupleField)
                else _value_writer(get_schema_field_type(f), flexible, optional=False))

        def write_array(out: bytearray, entity: Any) -> None:
            items = getattr(entity, name)
            if items is None:
                if flexible:
                    out.append(0)
                else:
                    out += _INT32.pack(-1)
                return
            if flexible:
                _uvarint(out, len(items) + 1)
            else:
                out += _INT32.pack(len(items))
            for value in items:
                if type(value) is Encoded:
                    out += value
                else:
                    item(out, value)

        return write_array
    value_writer = _value_writer(get_schema_field_type(f), flexible, optional)

    def write_value(out: bytearray, entity: Any) -> None:
        value_writer(out, getattr(entity, name))

    return write_value


def _value_writer(kafka_type: str, flexible: bool, optional: bool) -> Step:
    """A writer of one value (not of an entity's field): strings, bytes, uuids, and the
    fixed-size types as array items."""
    if kafka_type in ("string", "bytes", "records"):
        return _bytes_writer(kafka_type == "string", flexible, optional)
    if kafka_type == "uuid":
        def write_uuid(out: bytearray, value: Any) -> None:
            out += _ZERO_UUID if value is None else value.bytes

        return write_uuid
    code, convert = _NULLABLE_DATETIME if kafka_type == "datetime_i64" and optional else _FIXED[kafka_type]
    pack = struct.Struct(">" + code).pack
    if convert is None:
        def write_fixed(out: bytearray, value: Any) -> None:
            out += pack(value)

        return write_fixed

    def write_converted(out: bytearray, value: Any) -> None:
        out += pack(convert(value))

    return write_converted


def _bytes_writer(is_string: bool, flexible: bool, optional: bool) -> Step:
    legacy_length = _INT16 if is_string else _INT32

    def write_bytes(out: bytearray, value: Any) -> None:
        if value is None:
            if not optional:
                raise TypeError("Unexpectedly received None value")
            if flexible:
                out.append(0)
            else:
                out += legacy_length.pack(-1)
            return
        if isinstance(value, str):
            value = value.encode()
        if flexible:
            _uvarint(out, len(value) + 1)
        else:
            out += legacy_length.pack(len(value))
        out += value

    return write_bytes


def _tagged_step(tagged: list[tuple[int, Field[Any]]], flexible: bool) -> Step:
    """The tagged-fields section: kio's rule (a field at its default is not written), the
    present ones through kio's own writers."""
    if not tagged:
        def no_tags(out: bytearray, entity: Any) -> None:
            out.append(0)

        return no_tags
    plans = [(tag, f, get_field_writer(f, flexible=flexible, is_request_header=False, is_tag=True),
              get_tagged_field_default(f)) for tag, f in tagged]

    def write_tags(out: bytearray, entity: Any) -> None:
        present = []
        for tag, f, writer, implicit_default in plans:
            value = getattr(entity, f.name)
            if value == f.default or (f.default is MISSING and value == implicit_default):
                continue
            present.append((tag, writer, value))
        _uvarint(out, len(present))
        if present:
            buffer = io.BytesIO()
            for tag, writer, value in present:
                write_tagged_field(buffer, uvarint(tag), writer, value)
            out += buffer.getvalue()

    return write_tags
