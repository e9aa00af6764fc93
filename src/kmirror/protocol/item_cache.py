"""A response writer that keeps the encoding of the items of one array field, for responses
whose items a handler reuses from one request to the next (Metadata's topic entries, built
once per metadata image: `kmirror.broker.handlers.metadata`).

A Metadata response for a topic of 10,000 partitions takes about 0.2 s of CPU to build and
encode through kio's generic writers, and a client that meets NOT_LEADER_OR_FOLLOWER asks
for it again every few hundred milliseconds: a few such clients kept a node busy answering
Metadata alone. With the entries reused and their bytes kept, a repeated answer costs the
brokers list and a join. The bytes are those kio writes for the same entity (a test compares
them for every version).

It writes each field with kio's own field writers (`kio.serial._serialize.get_field_writer`,
not public API: kio is pinned in pyproject.toml, and the byte comparison fails on a kio whose
layout changes). Items are keyed by identity and held with their bytes, so an id is never taken for another
object's; the table is emptied when it passes `MAX_ITEMS`.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import fields

from kio.serial import entity_writer
from kio.serial._introspect import get_field_tag
from kio.serial._serialize import get_field_writer
from kio.serial.writers import Writable, write_compact_array_length, write_legacy_array_length
from kio.static.primitive import i32

from kmirror.protocol.entities import nested

MAX_ITEMS = 100_000

# response type name -> (the array field whose items' encodings are kept, the items' class name)
CACHED_ARRAYS = {"MetadataResponse": ("topics", "MetadataResponseTopic")}

_encoded: dict[int, tuple[object, bytes]] = {}


def writer_for(response_type: type) -> Callable[[Writable, object], None] | None:
    """The writer of `response_type` with its cached array, or None (kio's writer applies)."""
    cached = CACHED_ARRAYS.get(response_type.__name__)
    if cached is None:
        return None
    return _writer(response_type, *cached)


_writers: dict[type, Callable[[Writable, object], None] | None] = {}


def _writer(response_type: type, array_field: str, item_name: str) -> Callable[[Writable, object], None] | None:
    if response_type in _writers:
        return _writers[response_type]
    flexible = bool(getattr(response_type, "__flexible__"))  # noqa: B009 (kio sets it on each class; mypy does not know it)
    entity_fields = fields(response_type)
    if any(get_field_tag(f) is not None for f in entity_fields):
        _writers[response_type] = None  # tagged fields: kio's writer
        return None
    write_item = entity_writer(nested(response_type, item_name))
    steps: list[tuple[str, Callable[[Writable, object], None] | None]] = [
        (f.name, None if f.name == array_field else get_field_writer(f, flexible=flexible, is_request_header=False,
                                                                       is_tag=False))
        for f in entity_fields]

    def encoded(item: object) -> bytes:
        kept = _encoded.get(id(item))
        if kept is not None and kept[0] is item:
            return kept[1]
        if len(_encoded) >= MAX_ITEMS:
            _encoded.clear()
        buf = io.BytesIO()
        write_item(buf, item)
        data = buf.getvalue()
        _encoded[id(item)] = (item, data)
        return data

    def write(buffer: Writable, entity: object) -> None:
        for name, step in steps:
            value = getattr(entity, name)
            if step is not None:
                step(buffer, value)
                continue
            items = tuple(value)
            if flexible:
                write_compact_array_length(buffer, len(items))
            else:
                write_legacy_array_length(buffer, i32(len(items)))
            buffer.write(b"".join(encoded(item) for item in items))
        if flexible:
            buffer.write(b"\x00")  # no tagged fields

    _writers[response_type] = write
    return write
