"""ACL bindings (Kafka's AclControlManager): create, delete by filter, describe by filter.

Bindings are stored and replicated; `kmirror.metadata.authorizer` enforces them. Filter
matching follows Kafka's ResourcePatternFilter / AccessControlEntryFilter:
  pattern ANY      -> any pattern type, name equal (or name null)
  pattern MATCH    -> LITERAL with equal name or "*", or PREFIXED whose name prefixes the filter's
  LITERAL/PREFIXED -> that pattern type, name equal (or name null)
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.result import NONE, ApiError, ControllerResult, Rng
from kmirror.metadata.image import AclBinding, MetadataImage
from kmirror.metadata.records import AccessControlEntryRecord, Record, RemoveAccessControlEntryRecord

WILDCARD_RESOURCE = "*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7
    CLUSTER_MIRROR = 8  # KIP-1279 "ResourceType"


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, slots=True)
class AclCreation:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class AclFilter:
    resource_type: int = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = AclOperation.ANY
    permission_type: int = AclPermissionType.ANY


def _known(enum: type[IntEnum], value: int) -> bool:
    return value in enum._value2member_map_


def validate_creation(c: AclCreation) -> ApiError | None:
    if not _known(ResourceType, c.resource_type) or c.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return ApiError(ErrorCode.invalid_request, "Invalid resource type in ACL binding.")
    if c.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return ApiError(ErrorCode.invalid_request, "Invalid pattern type in ACL binding.")
    if not _known(AclOperation, c.operation) or c.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return ApiError(ErrorCode.invalid_request, "Invalid operation in ACL binding.")
    if c.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        return ApiError(ErrorCode.invalid_request, "Invalid permission type in ACL binding.")
    if not c.resource_name:
        return ApiError(ErrorCode.invalid_request, "Resource name should not be empty.")
    if c.resource_type == ResourceType.CLUSTER and c.resource_name != CLUSTER_NAME:
        return ApiError(ErrorCode.invalid_request, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    kind, sep, name = c.principal.partition(":")
    if not sep or not kind or not name:
        return ApiError(ErrorCode.invalid_request, f"Could not parse principal from `{c.principal}` (no colon is present separating the principal type from the principal name)")
    if not c.host:
        return ApiError(ErrorCode.invalid_request, "Host should not be empty.")
    return None


def validate_filter(f: AclFilter) -> ApiError | None:
    if not _known(ResourceType, f.resource_type) or f.resource_type == ResourceType.UNKNOWN:
        return ApiError(ErrorCode.invalid_request, "Invalid resource type in ACL filter.")
    if not _known(PatternType, f.pattern_type) or f.pattern_type == PatternType.UNKNOWN:
        return ApiError(ErrorCode.invalid_request, "Invalid pattern type in ACL filter.")
    if not _known(AclOperation, f.operation) or f.operation == AclOperation.UNKNOWN:
        return ApiError(ErrorCode.invalid_request, "Invalid operation in ACL filter.")
    if not _known(AclPermissionType, f.permission_type) or f.permission_type == AclPermissionType.UNKNOWN:
        return ApiError(ErrorCode.invalid_request, "Invalid permission type in ACL filter.")
    return None


def matches(f: AclFilter, b: AclBinding) -> bool:
    if f.resource_type != ResourceType.ANY and f.resource_type != b.resource_type:
        return False
    if not _pattern_matches(f, b):
        return False
    if f.principal is not None and f.principal != b.principal:
        return False
    if f.host is not None and f.host != b.host:
        return False
    if f.operation != AclOperation.ANY and f.operation != b.operation:
        return False
    return f.permission_type == AclPermissionType.ANY or f.permission_type == b.permission_type


def _pattern_matches(f: AclFilter, b: AclBinding) -> bool:
    if f.pattern_type == PatternType.MATCH:
        if f.resource_name is None:
            return True
        if b.pattern_type == PatternType.LITERAL:
            return b.resource_name in (f.resource_name, WILDCARD_RESOURCE)
        if b.pattern_type == PatternType.PREFIXED:
            return f.resource_name.startswith(b.resource_name)
        return False
    if f.pattern_type != PatternType.ANY and f.pattern_type != b.pattern_type:
        return False
    return f.resource_name is None or f.resource_name == b.resource_name


def create_acls(
    image: MetadataImage, creations: Sequence[AclCreation], rng: Rng
) -> ControllerResult[list[ApiError]]:
    """One error value per creation. An identical existing binding is left as is (success)."""
    existing = {_key(b) for b in image.acls.values()}
    records: list[Record] = []
    results: list[ApiError] = []
    for c in creations:
        err = validate_creation(c)
        if err is not None:
            results.append(err)
            continue
        key = (c.resource_type, c.resource_name, c.pattern_type, c.principal, c.host, c.operation, c.permission_type)
        if key not in existing:
            existing.add(key)
            acl_id = _new_id(image, rng, records)
            records.append(AccessControlEntryRecord(acl_id, *key))
        results.append(NONE)
    return ControllerResult(records, results)


def _key(b: AclBinding) -> tuple[int, str, int, str, str, int, int]:
    return (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation, b.permission_type)


def _new_id(image: MetadataImage, rng: Rng, pending: Sequence[Record]) -> uuid.UUID:
    taken = {r.id for r in pending if isinstance(r, AccessControlEntryRecord)}
    while True:
        acl_id = uuid.UUID(int=rng.getrandbits(128), version=4)
        if acl_id not in image.acls and acl_id not in taken:
            return acl_id


@dataclass(frozen=True, slots=True)
class DeleteAclsResult:
    error: ApiError
    deleted: tuple[AclBinding, ...]


def delete_acls(image: MetadataImage, filters: Sequence[AclFilter]) -> ControllerResult[list[DeleteAclsResult]]:
    """Per filter, the bindings it removed; a binding matched by several filters is removed once
    and reported under each."""
    records: list[Record] = []
    removed: set[uuid.UUID] = set()
    results: list[DeleteAclsResult] = []
    for f in filters:
        err = validate_filter(f)
        if err is not None:
            results.append(DeleteAclsResult(err, ()))
            continue
        hit = tuple(b for b in describe_acls(image, f))
        for b in hit:
            if b.id not in removed:
                removed.add(b.id)
                records.append(RemoveAccessControlEntryRecord(b.id))
        results.append(DeleteAclsResult(NONE, hit))
    return ControllerResult(records, results)


def describe_acls(image: MetadataImage, f: AclFilter) -> list[AclBinding]:
    """Matching bindings in a stable order (resource, then principal, host, operation)."""
    found = [b for b in image.acls.values() if matches(f, b)]
    found.sort(key=lambda b: (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation, b.permission_type))
    return found
