"""The ACL authorizer (Kafka's StandardAuthorizer / StandardAuthorizerData): ALLOWED or DENIED
for (principal, host, operation, resource type, resource name) from the metadata image's
ACL bindings. Sans-IO: the image's bindings in, a decision out.

Kafka's rules, in order:
1. a super user (`super.users`) is always allowed;
2. the bindings of the resource are those of its type whose pattern matches the name: LITERAL
   with the same name, LITERAL `*` (any name), PREFIXED whose name starts the resource's;
3. of those, a binding applies when its principal is the request's or `User:*`, its host the
   request's or `*`, and its operation the requested one or ALL. An ALLOW binding also
   applies to the operations it implies: DESCRIBE by READ, WRITE, DELETE and ALTER;
   DESCRIBE_CONFIGS by ALTER_CONFIGS. A DENY binding implies nothing (DENY READ does not deny
   DESCRIBE);
4. an applying DENY wins over any ALLOW; else an applying ALLOW allows;
5. else, when the resource has no binding at all (whoever it names), the answer is
   `allow.everyone.if.no.acl.found`; when it has some, DENIED.

`matching_rule` says why (Kafka's MatchingRule, the `based on rule ...` of its audit log):
`SuperUser` (rule 1), `MatchingAcl(acl=...)` naming the applying DENY, else an applying ALLOW
(rule 4), `DefaultAllow` / `DefaultDeny` (rule 5). `authorize` is its result.

`authorize_by_resource_type` is Kafka's `Authorizer.authorizeByResourceType` (KIP-679:
"may this principal WRITE some topic?"), used by InitProducerId for idempotent producers.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from kmirror.metadata.controller.acls import (
    WILDCARD_RESOURCE,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kmirror.metadata.image import AclBinding

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
KMIRROR_AUTHORIZER = "kmirror.StandardAuthorizer"
AUTHORIZER_CLASS_NAMES = ("", STANDARD_AUTHORIZER, KMIRROR_AUTHORIZER)
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
HARDCODED_NAME = "hardcode"  # a name no binding can be about (Kafka's `authorizeByResourceType`)

_IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                               AclOperation.DELETE, AclOperation.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


class AuthorizationResult(Enum):
    ALLOWED = "ALLOWED"
    DENIED = "DENIED"


def _enum_name(kind: type[Enum], value: int) -> str:
    try:
        return kind(value).name
    except ValueError:
        return str(value)


def standard_acl(b: AclBinding) -> str:
    """A binding as Kafka writes its StandardAcl record (in `MatchingAcl(acl=...)`)."""
    return (f"StandardAcl[resourceType={_enum_name(ResourceType, b.resource_type)}, "
            f"resourceName={b.resource_name}, patternType={_enum_name(PatternType, b.pattern_type)}, "
            f"principal={b.principal}, host={b.host}, operation={_enum_name(AclOperation, b.operation)}, "
            f"permissionType={_enum_name(AclPermissionType, b.permission_type)}]")


@dataclass(frozen=True, slots=True)
class SuperUserRule:
    """Rule 1: the principal is in `super.users`."""

    result: AuthorizationResult = AuthorizationResult.ALLOWED

    def __str__(self) -> str:
        return "SuperUser"


@dataclass(frozen=True, slots=True)
class DefaultRule:
    """Rule 5: no binding applies (`allow.everyone.if.no.acl.found` only for a resource
    without any binding)."""

    result: AuthorizationResult

    def __str__(self) -> str:
        return "DefaultAllow" if self.result is AuthorizationResult.ALLOWED else "DefaultDeny"


@dataclass(frozen=True, slots=True)
class MatchingAclRule:
    """Rule 4: the binding that decided."""

    acl: AclBinding
    result: AuthorizationResult

    def __str__(self) -> str:
        return f"MatchingAcl(acl={standard_acl(self.acl)})"


MatchingRule = SuperUserRule | DefaultRule | MatchingAclRule
SUPER_USER_RULE = SuperUserRule()
DEFAULT_DENY = DefaultRule(AuthorizationResult.DENIED)


def parse_super_users(value: str | None) -> frozenset[str]:
    """`super.users`: principals separated by semicolons (`User:admin;User:broker`)."""
    return frozenset(p.strip() for p in (value or "").split(";") if p.strip())


@dataclass(frozen=True, slots=True)
class AuthorizerSettings:
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False


@dataclass(frozen=True, slots=True)
class _ResourceAcls:
    """The bindings of one resource type, by pattern."""

    literal: Mapping[str, tuple[AclBinding, ...]]
    prefixed: Mapping[str, tuple[AclBinding, ...]]
    max_prefix: int = 0


@dataclass(slots=True)
class _Index:
    by_type: dict[int, _ResourceAcls] = field(default_factory=dict)

    @classmethod
    def of(cls, bindings: Iterable[AclBinding]) -> _Index:
        literal: dict[int, dict[str, list[AclBinding]]] = {}
        prefixed: dict[int, dict[str, list[AclBinding]]] = {}
        for b in bindings:
            side = prefixed if b.pattern_type == PatternType.PREFIXED else literal
            side.setdefault(b.resource_type, {}).setdefault(b.resource_name, []).append(b)
        index = cls()
        for rtype in literal.keys() | prefixed.keys():
            pre = prefixed.get(rtype, {})
            index.by_type[rtype] = _ResourceAcls(
                {k: tuple(v) for k, v in literal.get(rtype, {}).items()},
                {k: tuple(v) for k, v in pre.items()},
                max((len(k) for k in pre), default=0),
            )
        return index

    def matching(self, resource_type: int, name: str) -> Iterable[AclBinding]:
        """Every binding whose pattern matches the resource (rule 2)."""
        acls = self.by_type.get(resource_type)
        if acls is None:
            return
        yield from acls.literal.get(name, ())
        if name != WILDCARD_RESOURCE:
            yield from acls.literal.get(WILDCARD_RESOURCE, ())
        if acls.prefixed:
            for end in range(1, min(len(name), acls.max_prefix) + 1):
                yield from acls.prefixed.get(name[:end], ())


def _applies(b: AclBinding, principal: str, host: str, operation: int) -> AuthorizationResult | None:
    """Rule 3: what `b` says about the request, None when it does not apply."""
    if b.principal != principal and b.principal != WILDCARD_PRINCIPAL:
        return None
    if b.host != WILDCARD_HOST and b.host != host:
        return None
    allow = b.permission_type == AclPermissionType.ALLOW
    if b.operation != AclOperation.ALL:
        if allow and operation == AclOperation.DESCRIBE:
            if b.operation not in _IMPLIES_DESCRIBE:
                return None
        elif allow and operation == AclOperation.DESCRIBE_CONFIGS:
            if b.operation not in _IMPLIES_DESCRIBE_CONFIGS:
                return None
        elif b.operation != operation:
            return None
    return AuthorizationResult.ALLOWED if allow else AuthorizationResult.DENIED


class StandardAuthorizer:
    """Decisions over one set of bindings; `update` when the image's bindings change (the
    index is rebuilt only when the mapping given is another object)."""

    def __init__(self, settings: AuthorizerSettings, acls: Mapping[uuid.UUID, AclBinding] | None = None) -> None:
        self.settings = settings
        self._no_acl_rule = DefaultRule(AuthorizationResult.ALLOWED if settings.allow_everyone_if_no_acl_found
                                        else AuthorizationResult.DENIED)
        self._acls: Mapping[uuid.UUID, AclBinding] | None = None
        self._index = _Index()
        self.update(acls or {})

    def update(self, acls: Mapping[uuid.UUID, AclBinding]) -> None:
        if acls is not self._acls:
            self._acls = acls
            self._index = _Index.of(acls.values())

    @property
    def acl_count(self) -> int:
        """The bindings decided over (Kafka's `aclCount`)."""
        return len(self._acls or ())

    def is_super_user(self, principal: str) -> bool:
        return principal in self.settings.super_users

    def matching_rule(self, principal: str, host: str, operation: int, resource_type: int,
                      resource_name: str) -> MatchingRule:
        """The rule deciding the request (see the module docstring)."""
        if self.is_super_user(principal):
            return SUPER_USER_RULE
        found_acls = False
        allow: AclBinding | None = None
        for b in self._index.matching(resource_type, resource_name):
            found_acls = True
            result = _applies(b, principal, host, operation)
            if result is AuthorizationResult.DENIED:
                return MatchingAclRule(b, result)
            if result is AuthorizationResult.ALLOWED and allow is None:
                allow = b
        if allow is not None:
            return MatchingAclRule(allow, AuthorizationResult.ALLOWED)
        if found_acls:
            return DEFAULT_DENY
        return self._no_acl_rule

    def authorize(self, principal: str, host: str, operation: int, resource_type: int,
                  resource_name: str) -> AuthorizationResult:
        return self.matching_rule(principal, host, operation, resource_type, resource_name).result

    def authorize_by_resource_type(self, principal: str, host: str, operation: int,
                                   resource_type: int) -> AuthorizationResult:
        """ALLOWED when some resource of the type may be operated on: an ALLOW binding (of the
        operation or ALL) not dominated by a DENY (same literal name, or a denied prefix of
        its name; a DENY on `*` dominates all)."""
        # a name no binding can be about: super users, and allow.everyone with no bindings
        if self.authorize(principal, host, operation, resource_type, HARDCODED_NAME) is AuthorizationResult.ALLOWED:
            return AuthorizationResult.ALLOWED
        acls = self._index.by_type.get(resource_type)
        if acls is None:
            return AuthorizationResult.DENIED
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[AclBinding] = []
        for side in (acls.literal, acls.prefixed):
            for bindings in side.values():
                for b in bindings:
                    if b.principal not in (principal, WILDCARD_PRINCIPAL) or b.host not in (host, WILDCARD_HOST):
                        continue
                    if b.operation not in (operation, AclOperation.ALL):
                        continue
                    if b.permission_type == AclPermissionType.ALLOW:
                        allow.append(b)
                    elif b.pattern_type == PatternType.PREFIXED:
                        deny_prefixed.add(b.resource_name)
                    else:
                        deny_literal.add(b.resource_name)
        if WILDCARD_RESOURCE in deny_literal:
            return AuthorizationResult.DENIED
        for b in allow:
            if b.pattern_type == PatternType.LITERAL and b.resource_name in deny_literal:
                continue
            if any(b.resource_name[:end] in deny_prefixed for end in range(1, len(b.resource_name) + 1)):
                continue
            return AuthorizationResult.ALLOWED
        return AuthorizationResult.DENIED
