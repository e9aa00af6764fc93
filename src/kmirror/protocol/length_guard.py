"""Array lengths checked against the bytes that remain, before kio's native decoder runs
(sans-IO).

kio's native reader of a compact (flexible) array reserves memory for the declared element
count before reading any element: a 15-byte Metadata v12 request declaring 2^37 topics
makes it request 160 GB, and the allocation failure aborts the whole process (Rust
`rust_oom`), which no exception handler can catch. Legacy arrays, strings and bytes are
checked by kio itself.

`check_lengths(entity_type, buf, offset)` walks the wire layout of `entity_type` (fields in
order, then the tagged-field section of flexible entities) and raises `ImplausibleLength`
when an array declares more elements than bytes remain (every element takes at least one
byte), or the frame ends early. It allocates nothing per element; entities made only of
fixed-size fields are skipped in one step.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional

FIXED_SIZES = {"int8": 1, "bool": 1, "int16": 2, "int32": 4, "int64": 8, "uuid": 16, "float64": 8,
               "timedelta_i32": 4, "timedelta_i64": 8, "uint16": 2, "uint32": 4, "uint64": 8, "datetime_i64": 8,
               "error_code": 2}
_VARIABLE = frozenset({"string", "bytes", "records"})


class ImplausibleLength(ValueError):
    """A length the remaining bytes cannot hold."""


# A step of an entity's layout: ("fixed", size), ("var", kafka_type), ("entity", type),
# ("nullable_entity", type), ("entities", type), ("array", kafka_type)
_Step = tuple[str, Any]
_Layout = tuple[tuple[_Step, ...], bool, int | None]  # steps, flexible, size when all fixed
_layouts: dict[type, _Layout] = {}


def check_lengths(entity_type: type, buf: bytes | memoryview, offset: int) -> int:
    """The offset after the entity at `offset` (raises `ImplausibleLength`, see module doc)."""
    steps, flexible, _ = _layout(entity_type)
    end = len(buf)
    for kind, arg in steps:
        if kind == "fixed":
            offset += arg
        elif kind == "var":
            offset = _skip_variable(buf, offset, arg, flexible)
        elif kind == "entity":
            offset = check_lengths(arg, buf, offset)
        elif kind == "nullable_entity":  # a presence byte: -1 null, 1 present
            if offset >= end:
                raise ImplausibleLength("frame ends inside a field")
            present = buf[offset] != 0xFF
            offset += 1
            if present:
                offset = check_lengths(arg, buf, offset)
        else:  # an array of entities or primitives
            count, offset = _array_length(buf, offset, flexible)
            if count > end - offset:
                raise ImplausibleLength(f"array of {count} elements in {end - offset} bytes")
            if kind == "entities":
                offset = _skip_entities(arg, buf, offset, count)
            elif arg in FIXED_SIZES:
                offset += count * FIXED_SIZES[arg]
            else:
                for _ in range(count):
                    offset = _skip_variable(buf, offset, arg, flexible)
        if offset > end:
            raise ImplausibleLength("frame ends inside a field")
    if flexible:
        offset = _skip_tagged(buf, offset)
    return offset


def _skip_entities(entity_type: type, buf: bytes | memoryview, offset: int, count: int) -> int:
    """`count` consecutive entities; those of fixed-size fields only are stepped over
    without walking their layout (e.g. Fetch partitions)."""
    _, flexible, size = _layout(entity_type)
    if size is None:
        for _ in range(count):
            offset = check_lengths(entity_type, buf, offset)
        return offset
    if not flexible:
        return offset + count * size
    end = len(buf)
    for _ in range(count):
        offset += size
        if offset < end and buf[offset] == 0:  # no tagged fields: the common case
            offset += 1
        else:
            offset = _skip_tagged(buf, offset)
    return offset


def _skip_tagged(buf: bytes | memoryview, offset: int) -> int:
    tags, offset = _uvarint(buf, offset)
    for _ in range(tags):
        _, offset = _uvarint(buf, offset)
        size, offset = _uvarint(buf, offset)
        offset += size
        if offset > len(buf):
            raise ImplausibleLength("frame ends inside a tagged field")
    return offset


def _layout(entity_type: type) -> _Layout:
    cached = _layouts.get(entity_type)
    if cached is not None:
        return cached
    flexible = bool(getattr(entity_type, "__flexible__", False))
    steps: list[_Step] = []
    for f in dataclasses.fields(entity_type):
        if "tag" in f.metadata:
            continue  # in the tagged-field section
        kind = classify_field(f)
        kafka_type = f.metadata.get("kafka_type")
        if isinstance(kind, EntityTupleField):
            steps.append(("entities", kind.type_))
        elif isinstance(kind, EntityField):
            steps.append(("nullable_entity" if is_optional(f) else "entity", kind.type_))
        elif kind.is_array:
            steps.append(("array", kafka_type))
        elif kafka_type in _VARIABLE:
            steps.append(("var", kafka_type))
        else:
            size = FIXED_SIZES[str(kafka_type)]
            if steps and steps[-1][0] == "fixed":
                steps[-1] = ("fixed", steps[-1][1] + size)
            else:
                steps.append(("fixed", size))
    fixed_size = steps[0][1] if len(steps) == 1 and steps[0][0] == "fixed" else (0 if not steps else None)
    layout = (tuple(steps), flexible, fixed_size)
    _layouts[entity_type] = layout
    return layout


def _array_length(buf: bytes | memoryview, offset: int, flexible: bool) -> tuple[int, int]:
    if flexible:
        n, offset = _uvarint(buf, offset)
        return max(n - 1, 0), offset
    if offset + 4 > len(buf):
        raise ImplausibleLength("frame ends inside an array length")
    n = int.from_bytes(buf[offset:offset + 4], "big", signed=True)
    return max(n, 0), offset + 4


def _skip_variable(buf: bytes | memoryview, offset: int, kafka_type: str, flexible: bool) -> int:
    if flexible:
        n, offset = _uvarint(buf, offset)
        return offset + max(n - 1, 0)
    width = 2 if kafka_type == "string" else 4
    if offset + width > len(buf):
        raise ImplausibleLength("frame ends inside a length")
    n = int.from_bytes(buf[offset:offset + width], "big", signed=True)
    return offset + width + max(n, 0)


def _uvarint(buf: bytes | memoryview, offset: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if offset >= len(buf):
            raise ImplausibleLength("frame ends inside a varint")
        byte = buf[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, offset
        shift += 7
        if shift > 35:
            raise ImplausibleLength("varint longer than 5 bytes")
