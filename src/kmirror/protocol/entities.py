"""Building kio entities for whichever version a client asked for.

Each kio version is its own dataclass with only that version's fields, so a handler that
serves v0..v12 builds with `build(cls, **fields)`: fields the version lacks are dropped,
fields it has but the handler did not pass keep their schema default.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any, TypeVar

T = TypeVar("T")


_FIELDS: dict[type, frozenset[str]] = {}


def field_names(cls: type) -> frozenset[str]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = frozenset(f.name for f in dataclasses.fields(cls))
    return names


def build(cls: type[T], **values: Any) -> T:
    names = field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


def nested(entity_type: type, name: str) -> type[Any]:
    """A nested entity class from the same schema module (same API and version)."""
    cls: type[Any] = getattr(sys.modules[entity_type.__module__], name)
    return cls


def has_field(entity_type: type, name: str) -> bool:
    return name in field_names(entity_type)
