"""kafka-acls.sh's options as ACL bindings (Kafka's `AclCommand`), and their printed forms.

Pure: `AclOptions` (what `kmirror acls` was given) becomes a map from resource pattern
filters to access control entries, as `AclCommand.getResourceFilterToAcls` builds it:
- resources: `--topic`, `--group`, `--transactional-id`, `--delegation-token`,
  `--user-principal`, `--cluster-mirror` (KIP-1279) (each with `--resource-pattern-type`,
  default LITERAL) and `--cluster` (the LITERAL `kafka-cluster` pattern, only when the pattern type is LITERAL, as Kafka);
- entries: every `--allow-principal` x `--allow-host` (default `*`) x `--operation`
  (default All), ALLOW; likewise DENY;
- `--producer`: Write, Describe, Create on the topics, Write, Describe on the transactional
  ids, IdempotentWrite on the cluster with `--idempotent`; `--consumer`: Read, Describe on the
  topics, Read on the groups. Both may be given; their entries are merged per resource.
An operation a resource type does not support is refused (Kafka's `AclEntry.supportedOperations`,
plus All). The strings are those of Kafka's `ResourcePattern`, `AccessControlEntry` and
`AclBinding` `toString()`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

from kmirror.cli.errors import CommandError
from kmirror.client.acls import AclBinding, AclBindingFilter
from kmirror.metadata.controller.acls import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kmirror.security.delegation_token import KafkaPrincipal

WILDCARD_HOST = "*"
Op = AclOperation

# Kafka's AclEntry.supportedOperations (TwoPhaseCommit on transactional ids: KIP-939); All
# is valid on every resource type.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                                   Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                                     Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({Op.DESCRIBE, Op.WRITE, Op.TWO_PHASE_COMMIT}),
    ResourceType.DELEGATION_TOKEN: frozenset({Op.DESCRIBE}),
    ResourceType.USER: frozenset({Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS}),
    # KIP-1279 "Security Control": what a cluster mirror's RPCs ask for
    ResourceType.CLUSTER_MIRROR: frozenset({Op.CREATE, Op.ALTER, Op.DESCRIBE, Op.DELETE, Op.ALTER_CONFIGS,
                                            Op.DESCRIBE_CONFIGS}),
}

ACL_OPERATIONS = tuple(op for op in AclOperation if op not in (Op.UNKNOWN, Op.ANY))
"""The operations an ACL may name (Kafka's `AclEntry.ACL_OPERATIONS`), in code order."""

PATTERN_TYPES = ("literal", "prefixed", "any", "match")


def pascal_name(value: IntEnum) -> str:
    """Kafka's `SecurityUtils.operationName`: IDEMPOTENT_WRITE -> IdempotentWrite."""
    return "".join(part.capitalize() for part in value.name.split("_"))


def parse_operation(name: str) -> AclOperation:
    """An operation by Kafka's name (`IdempotentWrite`), case-insensitively (`idempotentwrite`),
    as `SecurityUtils.operation`."""
    key = name.strip()
    for op in ACL_OPERATIONS:
        if key == pascal_name(op) or key.upper() == pascal_name(op).upper():
            return op
    valid = ", ".join(pascal_name(op) for op in ACL_OPERATIONS)
    raise CommandError(f"Unknown operation '{name}'; valid operation names are: {valid}")


def parse_pattern_type(name: str) -> PatternType:
    if name.strip().lower() not in PATTERN_TYPES:
        raise CommandError(f"Unknown resource-pattern-type: {name} (valid: {', '.join(PATTERN_TYPES)})")
    return PatternType[name.strip().upper()]


def parse_principal(text: str) -> str:
    """`Type:name` (Kafka's `SecurityUtils.parseKafkaPrincipal`: split at the first colon)."""
    try:
        return str(KafkaPrincipal.parse(text.strip()))
    except ValueError as exc:
        raise CommandError(str(exc)) from None


E = TypeVar("E", bound=IntEnum)


def _known(enum: type[E], code: int) -> E:
    """The member for `code`, or UNKNOWN (0) for a code this tool does not know."""
    return enum(code) if code in enum._value2member_map_ else enum(0)


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """A resource pattern (LITERAL or PREFIXED) or a filter of them (ANY, MATCH)."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType

    def __str__(self) -> str:
        name = "<any>" if self.name is None else self.name
        return f"ResourcePattern(resourceType={self.resource_type.name}, name={name}, patternType={self.pattern_type.name})"

    def sort_key(self) -> tuple[int, str, int]:
        return (self.resource_type, self.name or "", self.pattern_type)

    def binding_filter(self, entry: AccessControlEntry | None = None) -> AclBindingFilter:
        """This pattern filter with `entry` as the entry filter, or any entry."""
        if entry is None:
            return AclBindingFilter(self.resource_type, self.name, self.pattern_type)
        return AclBindingFilter(self.resource_type, self.name, self.pattern_type, entry.principal, entry.host,
                                entry.operation, entry.permission_type)

    def binding(self, entry: AccessControlEntry) -> AclBinding:
        assert self.name is not None and self.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED)
        return AclBinding(self.resource_type, self.name, self.pattern_type, entry.principal, entry.host,
                          entry.operation, entry.permission_type)


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission_type.name})")

    def sort_key(self) -> tuple[str, str, int, int]:
        return (self.principal, self.host, self.operation, self.permission_type)


def pattern_of(b: AclBinding) -> ResourcePatternFilter:
    return ResourcePatternFilter(_known(ResourceType, b.resource_type), b.resource_name,
                                 _known(PatternType, b.pattern_type))


def entry_of(b: AclBinding) -> AccessControlEntry:
    return AccessControlEntry(b.principal, b.host, _known(AclOperation, b.operation),
                              _known(AclPermissionType, b.permission_type))


def binding_str(resource: ResourcePatternFilter, entry: AccessControlEntry) -> str:
    """Kafka's `AclBinding.toString()`."""
    return f"(pattern={resource}, entry={entry})"


def group_by_resource(bindings: Iterable[AclBinding]) -> dict[ResourcePatternFilter, set[AccessControlEntry]]:
    out: dict[ResourcePatternFilter, set[AccessControlEntry]] = {}
    for b in bindings:
        out.setdefault(pattern_of(b), set()).add(entry_of(b))
    return out


def _entry_lines(entries: Iterable[AccessControlEntry]) -> str:
    return "\n".join(f"\t{e}" for e in sorted(entries, key=AccessControlEntry.sort_key))


def format_current(acls: dict[ResourcePatternFilter, set[AccessControlEntry]]) -> str:
    """`--list` output: per resource, `Current ACLs for resource `...`:` and one tab-indented
    entry per line, then a blank line (resources and entries sorted)."""
    return "".join(f"Current ACLs for resource `{r}`:\n{_entry_lines(acls[r])}\n\n"
                   for r in sorted(acls, key=ResourcePatternFilter.sort_key))


def format_adding(resource: ResourcePatternFilter, entries: Iterable[AccessControlEntry]) -> str:
    return f"Adding ACLs for resource `{resource}`: \n {_entry_lines(entries)}\n\n"


def format_remove_question(resource: ResourcePatternFilter, entries: set[AccessControlEntry]) -> str:
    if not entries:
        return f"Are you sure you want to delete all ACLs for resource filter `{resource}`? (y/n)"
    return f"Are you sure you want to remove ACLs: \n {_entry_lines(entries)}\n from resource filter `{resource}`? (y/n)"


@dataclass(frozen=True, slots=True)
class AclOptions:
    """kafka-acls.sh's resource and entry options, as given (names not yet parsed)."""

    topics: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    transactional_ids: tuple[str, ...] = ()
    delegation_tokens: tuple[str, ...] = ()
    user_principals: tuple[str, ...] = ()
    cluster_mirrors: tuple[str, ...] = ()
    cluster: bool = False
    pattern_type: PatternType = PatternType.LITERAL
    operations: tuple[str, ...] = ()
    allow_principals: tuple[str, ...] = ()
    deny_principals: tuple[str, ...] = ()
    allow_hosts: tuple[str, ...] = ()
    deny_hosts: tuple[str, ...] = ()
    producer: bool = False
    consumer: bool = False
    idempotent: bool = False


CLUSTER_RESOURCE = ResourcePatternFilter(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)

NO_RESOURCE = ("You must provide at least one resource: --topic <topic> or --cluster or --group <group> or "
               "--delegation-token <Delegation Token ID>")


def resource_filters(o: AclOptions, *, required: bool) -> list[ResourcePatternFilter]:
    """The resources the options name (Kafka's `getResourceFilter`), in option order."""
    out: list[ResourcePatternFilter] = [ResourcePatternFilter(ResourceType.TOPIC, t.strip(), o.pattern_type)
                                        for t in o.topics]
    if o.pattern_type == PatternType.LITERAL and (o.cluster or o.idempotent):
        out.append(CLUSTER_RESOURCE)
    for kind, names in ((ResourceType.GROUP, o.groups), (ResourceType.TRANSACTIONAL_ID, o.transactional_ids),
                        (ResourceType.DELEGATION_TOKEN, o.delegation_tokens), (ResourceType.USER, o.user_principals),
                        (ResourceType.CLUSTER_MIRROR, o.cluster_mirrors)):
        out.extend(ResourcePatternFilter(kind, name.strip(), o.pattern_type) for name in names)
    if not out and required:
        raise CommandError(NO_RESOURCE)
    return list(dict.fromkeys(out))


def entries(o: AclOptions, operations: Iterable[AclOperation]) -> set[AccessControlEntry]:
    """Every principal x host x operation, ALLOW then DENY (Kafka's `getAcl`): hosts default
    to `*` when principals are given."""
    ops = list(operations)
    out: set[AccessControlEntry] = set()
    for principals, hosts, permission in ((o.allow_principals, o.allow_hosts, AclPermissionType.ALLOW),
                                          (o.deny_principals, o.deny_hosts, AclPermissionType.DENY)):
        parsed = {parse_principal(p) for p in principals}
        for principal in parsed:
            for host in {h.strip() for h in hosts} or {WILDCARD_HOST}:
                out.update(AccessControlEntry(principal, host, op, permission) for op in ops)
    return out


def resource_filter_to_acls(o: AclOptions) -> dict[ResourcePatternFilter, set[AccessControlEntry]]:
    """Kafka's `getResourceFilterToAcls`: the entries to add or remove per resource (an empty
    set on `--remove` means every entry of that resource)."""
    filters = resource_filters(o, required=True)
    out: dict[ResourcePatternFilter, set[AccessControlEntry]] = {}
    if not o.producer and not o.consumer:
        ops = {parse_operation(name) for name in o.operations} or {Op.ALL}
        acls = entries(o, ops)
        out = {f: set(acls) for f in filters}
    if o.producer:
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                out[f] = entries(o, (Op.WRITE, Op.DESCRIBE, Op.CREATE))
            elif f.resource_type == ResourceType.TRANSACTIONAL_ID:
                out[f] = entries(o, (Op.WRITE, Op.DESCRIBE))
        if o.idempotent:
            out[CLUSTER_RESOURCE] = entries(o, (Op.IDEMPOTENT_WRITE,))
    if o.consumer:
        for f in filters:
            if f.resource_type == ResourceType.TOPIC:
                out.setdefault(f, set()).update(entries(o, (Op.READ, Op.DESCRIBE)))
            elif f.resource_type == ResourceType.GROUP:
                out.setdefault(f, set()).update(entries(o, (Op.READ,)))
    validate_operations(out)
    return out


def validate_operations(acls: dict[ResourcePatternFilter, set[AccessControlEntry]]) -> None:
    for resource, resource_entries in acls.items():
        valid = SUPPORTED_OPERATIONS[resource.resource_type] | {Op.ALL}
        if any(e.operation not in valid for e in resource_entries):
            names = ", ".join(op.name for op in sorted(valid))
            raise CommandError(f"ResourceType {resource.resource_type.name} only supports operations [{names}]")


def resource_to_acls(o: AclOptions) -> dict[ResourcePatternFilter, set[AccessControlEntry]]:
    """What `--add` creates (Kafka's `getResourceToAcls`): a specific pattern type, and at
    least one entry per resource."""
    if o.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise CommandError(f"A '--resource-pattern-type' value of '{o.pattern_type.name}' is not valid when adding acls.")
    acls = resource_filter_to_acls(o)
    if any(not e for e in acls.values()):
        raise CommandError("You must specify one of: --allow-principal, --deny-principal when trying to add ACLs.")
    return acls
