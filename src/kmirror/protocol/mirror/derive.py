"""New versions of existing Kafka APIs, derived from kio's generated schemas.

KIP-1279 adds fields to existing APIs in a new version (Fetch v19 `MirrorLeaderEpoch`,
CreateTopics v8 `MirrorInfo`). kio 0.6.5 stops at Kafka 4.2 (Fetch v18, CreateTopics v7), so
the new version is the previous one's classes rebuilt with the new `__version__`, nested types
re-pointed to their rebuilt twins, and the KIP's fields appended to the named entities. The
result is the same kind of frozen, slotted, keyword-only dataclass kio generates, so
`kio.serial.entity_reader`/`entity_writer` handle it.

The same rebuild gives a version whose error codes are plain int16 (`int16_error_codes`):
kio's native reader refuses a code its `ErrorCode` table lacks, while a Kafka client reads
any int16 and treats an unknown code as an error it does not know (READ_ONLY_TOPIC in a
Produce response, or a code newer than kio from a foreign broker).
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass
from types import ModuleType, UnionType
from typing import Any, get_args, get_origin

from kio.static.primitive import i16


@dataclass(frozen=True, slots=True)
class ExtraField:
    """A field the new version adds to one entity (appended after the existing ones)."""

    name: str
    type_: Any
    field: Any  # a dataclasses.field(...) carrying kafka_type / tag / default


def entity_classes(module: ModuleType) -> list[type[Any]]:
    """The kio entity classes of a schema module, in definition order (nested before users)."""
    return [
        v for v in vars(module).values()
        if isinstance(v, type) and dataclasses.is_dataclass(v) and v.__module__ == module.__name__
        and hasattr(v, "__api_key__")
    ]


def derive(
    sources: Sequence[ModuleType],
    *,
    version: int,
    module_name: str,
    extra: Mapping[str, Sequence[ExtraField]] | None = None,
    int16_error_codes: bool = False,
) -> dict[str, type[Any]]:
    """Rebuild every entity of `sources` (kio schema modules of one API) at `version`.

    Returns name -> class; the caller binds them as attributes of `module_name` so
    `kmirror.protocol.entities.nested` finds nested types by name.
    """
    extra = dict(extra or {})
    rebuilt: dict[type[Any], type[Any]] = {}
    by_name: dict[str, type[Any]] = {}
    for module in sources:
        for cls in entity_classes(module):
            if cls.__name__ in by_name:
                raise ValueError(f"entity name {cls.__name__} defined twice")
            new = _rebuild(cls, version, module_name, rebuilt, extra.pop(cls.__name__, ()), int16_error_codes)
            rebuilt[cls] = new
            by_name[cls.__name__] = new
    if extra:
        raise ValueError(f"no entity named {sorted(extra)}")
    return by_name


def _rebuild(cls: type[Any], version: int, module_name: str, rebuilt: Mapping[type[Any], type[Any]],
             additions: Sequence[ExtraField], int16_error_codes: bool = False) -> type[Any]:
    specs: list[tuple[str, Any, Any]] = []
    for f in dataclasses.fields(cls):
        kwargs: dict[str, Any] = {"metadata": f.metadata}
        if int16_error_codes and f.metadata.get("kafka_type") == "error_code":
            specs.append((f.name, i16, dataclasses.field(metadata={**f.metadata, "kafka_type": "int16"})))
            continue
        if f.default is not MISSING:
            kwargs["default"] = _convert_default(f.default, rebuilt)
        elif f.default_factory is not MISSING:
            kwargs["default_factory"] = f.default_factory
        specs.append((f.name, _substitute(f.type, rebuilt), dataclasses.field(**kwargs)))
    for add in additions:
        specs.append((add.name, _substitute(add.type_, rebuilt), add.field))
    namespace = {
        "__type__": cls.__type__,
        "__version__": i16(version),
        "__flexible__": cls.__flexible__,
        "__api_key__": cls.__api_key__,
        "__header_schema__": cls.__header_schema__,
        "__doc__": cls.__doc__,
    }
    new: type[Any] = dataclasses.make_dataclass(
        cls.__name__, specs, namespace=namespace, frozen=True, slots=True, kw_only=True)
    new.__module__ = module_name
    new.__qualname__ = cls.__name__
    return new


def _substitute(tp: Any, rebuilt: Mapping[type[Any], type[Any]]) -> Any:
    if isinstance(tp, type) and tp in rebuilt:
        return rebuilt[tp]
    origin = get_origin(tp)
    if origin is tuple:
        args = get_args(tp)
        return tuple[_substitute(args[0], rebuilt), ...]  # type: ignore[misc]
    if origin is UnionType:
        return functools.reduce(operator.or_, (_substitute(a, rebuilt) for a in get_args(tp)))
    return tp


def _convert_default(value: Any, rebuilt: Mapping[type[Any], type[Any]]) -> Any:
    new_cls = rebuilt.get(type(value))
    if new_cls is None:
        return value
    return new_cls(**{f.name: _convert_default(getattr(value, f.name), rebuilt)
                      for f in dataclasses.fields(value)})
