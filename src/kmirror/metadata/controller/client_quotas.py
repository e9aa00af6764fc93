"""Client quotas in the metadata log (Kafka's ClientQuotaControlManager and
ClientQuotasImage.describe).

`alter_client_quotas` returns one error per entity, in request order, and ClientQuotaRecords
only for the values that change; a refused entity writes nothing (its other keys included),
as Kafka answers the entity once with the first failure. `describe_client_quotas` applies
DescribeClientQuotas' filter: components match an entity type exactly (a name), its default
(null) or any name ("specified"); `strict` keeps only entities with no other type.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from kio.schema.errors import ErrorCode

from kmirror.config.client_quotas import (
    CLIENT_ID,
    ENTITY_TYPES,
    IP,
    USER,
    ClientQuotaEntity,
    validate_entity,
    validate_value,
)
from kmirror.metadata.controller.result import NONE, ApiError, ControllerResult
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.records import ClientQuotaRecord, Record


@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    entity: tuple[tuple[str, str | None], ...]
    """As sent: `(entity_type, entity_name)` pairs in request order."""
    ops: tuple[tuple[str, float | None], ...]
    """`(key, value)`; a None value removes the key."""


def alter_client_quotas(
    image: MetadataImage, alterations: Sequence[QuotaAlteration], *, validate_only: bool = False
) -> ControllerResult[list[ApiError]]:
    records: list[Record] = []
    results: list[ApiError] = []
    seen: set[ClientQuotaEntity] = set()
    for alteration in alterations:
        entity, reason = validate_entity(alteration.entity)
        if entity is None:
            results.append(ApiError(ErrorCode.invalid_request, reason))
            continue
        if entity in seen:
            results.append(ApiError(ErrorCode.invalid_request, f"Ignoring duplicate entity {_label(entity)}"))
            continue
        seen.add(entity)
        outcome = _alter_entity(image, entity, alteration.ops)
        if isinstance(outcome, ApiError):
            results.append(outcome)
            continue
        if not validate_only:
            records.extend(outcome)
        results.append(NONE)
    return ControllerResult(records, results)


def _alter_entity(
    image: MetadataImage, entity: ClientQuotaEntity, ops: Sequence[tuple[str, float | None]]
) -> list[Record] | ApiError:
    current = image.client_quotas.get(entity, {})
    keys: set[str] = set()
    records: list[Record] = []
    for key, value in ops:
        if key in keys:
            return ApiError(ErrorCode.invalid_request,
                            f"Duplicate quota key {key} not updating quota for this entity {_label(entity)}")
        keys.add(key)
        if value is None:
            if key in current:
                records.append(ClientQuotaRecord(entity, key, 0.0, remove=True))
            continue
        reason = validate_value(entity, key, value)
        if reason is not None:
            return ApiError(ErrorCode.invalid_request, reason)
        if current.get(key) != float(value):
            records.append(ClientQuotaRecord(entity, key, float(value)))
    return records


class MatchType(IntEnum):
    """DescribeClientQuotas' `match_type`."""

    EXACT = 0
    DEFAULT = 1
    SPECIFIED = 2


@dataclass(frozen=True, slots=True)
class QuotaFilterComponent:
    entity_type: str
    match_type: int
    match: str | None


@dataclass(frozen=True, slots=True)
class DescribedQuotas:
    error: ApiError
    entries: tuple[tuple[ClientQuotaEntity, Mapping[str, float]], ...] = ()


def describe_client_quotas(
    image: MetadataImage, components: Sequence[QuotaFilterComponent], strict: bool
) -> DescribedQuotas:
    exact: dict[str, str | None] = {}
    specified: set[str] = set()
    for c in components:
        if not c.entity_type:
            return DescribedQuotas(ApiError(ErrorCode.invalid_request, "Invalid empty entity type."))
        if c.entity_type in exact or c.entity_type in specified:
            return DescribedQuotas(ApiError(
                ErrorCode.invalid_request, f"Entity type {c.entity_type} cannot appear more than once in the filter."))
        if c.entity_type not in ENTITY_TYPES:
            return DescribedQuotas(ApiError(ErrorCode.unsupported_version, f"Unsupported entity type {c.entity_type}"))
        if c.match_type == MatchType.EXACT:
            if c.match is None:
                return DescribedQuotas(ApiError(
                    ErrorCode.invalid_request, "Request specified MATCH_TYPE_EXACT, but set match string to null."))
            exact[c.entity_type] = c.match
        elif c.match_type == MatchType.DEFAULT:
            if c.match is not None:
                return DescribedQuotas(ApiError(
                    ErrorCode.invalid_request, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."))
            exact[c.entity_type] = None
        elif c.match_type == MatchType.SPECIFIED:
            if c.match is not None:
                return DescribedQuotas(ApiError(
                    ErrorCode.invalid_request,
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."))
            specified.add(c.entity_type)
        else:
            return DescribedQuotas(ApiError(ErrorCode.invalid_request, f"Unknown match type {c.match_type}"))
    named = set(exact) | specified
    if IP in named and (USER in named or CLIENT_ID in named):
        return DescribedQuotas(ApiError(
            ErrorCode.invalid_request,
            "Invalid entity filter component combination. IP filter component should not be used with user or "
            "clientId filter component."))
    found = []
    for entity, values in sorted(image.client_quotas.items(), key=lambda kv: _sort_key(kv[0])):
        pairs = dict(entity)
        if any(t not in pairs or pairs[t] != name for t, name in exact.items()):
            continue
        if any(t not in pairs for t in specified):
            continue
        if strict and len(pairs) != len(named):
            continue
        found.append((entity, values))
    return DescribedQuotas(NONE, tuple(found))


def _sort_key(entity: ClientQuotaEntity) -> tuple[tuple[str, int, str], ...]:
    return tuple((t, 0 if n is None else 1, n or "") for t, n in entity)


def _label(entity: ClientQuotaEntity) -> str:
    return "ClientQuotaEntity(entries={" + ", ".join(f"{t}={n}" for t, n in entity) + "})"
