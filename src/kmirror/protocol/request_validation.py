"""Null where the schema forbids it: the check kio's decoder leaves to the reader (sans-IO).

kio decodes a length of -1 as None for every array, string and bytes field, nullable or not.
Kafka's generated readers refuse a null non-nullable field ("non-nullable field ... was
serialized as null") and the request is then an InvalidRequestException: the connection is
closed. `null_field` finds such a field so the caller can do the same, before any handler
sees a request it would trip over (e.g. ListOffsets v1 with `topics` = -1).

Per entity type a plan (computed once) lists only the fields that can hold None: strings,
bytes, arrays and nested entities. Integer-only entities (e.g. Fetch partitions) are not
walked at all.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional

_NULLABLE_KINDS = frozenset({"string", "bytes"})
# (field name, may be None, child entity type or None, child is an array of entities)
_Plan = tuple[tuple[str, bool, type | None, bool], ...]
_plans: dict[type, _Plan] = {}


def null_field(entity: Any) -> str | None:
    """The dotted path of the first non-nullable field holding None, or None."""
    return _check(entity, type(entity).__name__)


def _check(entity: Any, path: str) -> str | None:
    for name, optional, child, is_array in _plan(type(entity)):
        value = getattr(entity, name)
        if value is None:
            if not optional:
                return f"{path}.{name}"
            continue
        if child is None:
            continue
        if is_array:
            for item in value:
                found = _check(item, f"{path}.{name}[]")
                if found is not None:
                    return found
        else:
            found = _check(value, f"{path}.{name}")
            if found is not None:
                return found
    return None


def _plan(entity_type: type) -> _Plan:
    plan = _plans.get(entity_type)
    if plan is not None:
        return plan
    _plans[entity_type] = ()  # a guard, should a schema ever nest itself
    out: list[tuple[str, bool, type | None, bool]] = []
    for f in dataclasses.fields(entity_type):
        kind = classify_field(f)
        if isinstance(kind, EntityField | EntityTupleField):
            child = kind.type_ if _plan(kind.type_) else None
            out.append((f.name, is_optional(f), child, kind.is_array))
        elif kind.is_array or f.metadata.get("kafka_type") in _NULLABLE_KINDS:
            out.append((f.name, is_optional(f), None, False))
    plan = _plans[entity_type] = tuple(out)
    return plan
