"""Admin methods for ACLs (Kafka Admin `describeAcls`, `createAcls`, `deleteAcls`).

`AclAdmin` is mixed into `kmirror.client.admin.Admin`; it needs `self.cluster`. Codes are
Kafka's (ResourceType, PatternType, AclOperation, AclPermissionType). DescribeAcls is read
from any broker's metadata; CreateAcls goes where other admin writes go (a broker forwards
it to the controller).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kio.static.primitive import i8

from kmirror.client.cluster import Cluster
from kmirror.client.errors import KafkaError, check
from kmirror.protocol.entities import build, nested

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
ANY = 1  # ResourceType / PatternType / AclOperation / AclPermissionType ANY


@dataclass(frozen=True, slots=True)
class AclBinding:
    """A resource pattern and an access control entry, as Kafka's `AclBinding` (codes)."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's `AclBindingFilter` (codes): ANY (1) or None matches every value of a field;
    pattern type MATCH (2) matches the patterns that would apply to `resource_name`
    (LITERAL equal or "*", PREFIXED a prefix of it). The defaults match every binding."""

    resource_type: int = ANY
    resource_name: str | None = None
    pattern_type: int = ANY
    principal: str | None = None
    host: str | None = None
    operation: int = ANY
    permission_type: int = ANY


MATCH_ALL = AclBindingFilter()


def _order(b: AclBinding) -> tuple[int, str, int, str, str, int, int]:
    return (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation, b.permission_type)


class AclAdmin:
    cluster: Cluster

    async def describe_acls(self, acl_filter: AclBindingFilter = MATCH_ALL) -> list[AclBinding]:
        """The bindings matching `acl_filter` (by default every binding of the cluster), sorted."""
        f = acl_filter
        conn = await self.cluster.any_connection()
        response = await conn.send(conn.build_request(
            DESCRIBE_ACLS, resource_type_filter=i8(f.resource_type), resource_name_filter=f.resource_name,
            pattern_type_filter=i8(f.pattern_type), principal_filter=f.principal, host_filter=f.host,
            operation=i8(f.operation), permission_type=i8(f.permission_type)))
        check(response.error_code, response.error_message, "DescribeAcls")
        return sorted(
            (AclBinding(int(r.resource_type), r.resource_name, int(r.pattern_type), a.principal, a.host,
                        int(a.operation), int(a.permission_type))
             for r in response.resources for a in r.acls),
            key=_order)

    async def create_acls(self, bindings: Iterable[AclBinding]) -> dict[AclBinding, KafkaError | None]:
        """binding -> None when created (or already present), else its error."""
        wanted = list(bindings)
        if not wanted:
            return {}
        conn = await self.cluster.controller_connection()
        rt = conn.request_type(CREATE_ACLS)
        Creation = nested(rt, "AclCreation")
        response = await conn.send(build(rt, creations=tuple(
            build(Creation, resource_type=i8(b.resource_type), resource_name=b.resource_name,
                  resource_pattern_type=i8(b.pattern_type), principal=b.principal, host=b.host,
                  operation=i8(b.operation), permission_type=i8(b.permission_type))
            for b in wanted)))
        return {b: (KafkaError(int(r.error_code), r.error_message, "CreateAcls") if int(r.error_code) else None)
                for b, r in zip(wanted, response.results, strict=True)}

    async def delete_acls(self, bindings: Iterable[AclBinding]) -> dict[AclBinding, KafkaError | None]:
        """Delete exactly these bindings (one filter each, every field given, so a filter
        matches its own binding only): binding -> None when deleted (or already absent),
        else its error."""
        wanted = list(bindings)
        if not wanted:
            return {}
        response = await self._delete(AclBindingFilter(b.resource_type, b.resource_name, b.pattern_type, b.principal,
                                                       b.host, b.operation, b.permission_type) for b in wanted)
        return {b: (KafkaError(int(r.error_code), r.error_message, "DeleteAcls") if int(r.error_code) else None)
                for b, r in zip(wanted, response.filter_results, strict=True)}

    async def delete_acls_matching(self, filters: Iterable[AclBindingFilter]) -> list[list[AclBinding]]:
        """Delete every binding each filter matches (Kafka Admin `deleteAcls`): per filter, in
        order, the bindings it deleted. A filter the controller refuses raises its error."""
        wanted = list(filters)
        if not wanted:
            return []
        response = await self._delete(wanted)
        out: list[list[AclBinding]] = []
        for r in response.filter_results:
            check(r.error_code, r.error_message, "DeleteAcls")
            out.append(sorted((AclBinding(int(m.resource_type), m.resource_name, int(m.pattern_type), m.principal,
                                          m.host, int(m.operation), int(m.permission_type))
                               for m in r.matching_acls), key=_order))
        return out

    async def _delete(self, filters: Iterable[AclBindingFilter]) -> Any:
        conn = await self.cluster.controller_connection()
        rt = conn.request_type(DELETE_ACLS)
        Filter = nested(rt, "DeleteAclsFilter")
        return await conn.send(build(rt, filters=tuple(
            build(Filter, resource_type_filter=i8(f.resource_type), resource_name_filter=f.resource_name,
                  pattern_type_filter=i8(f.pattern_type), principal_filter=f.principal, host_filter=f.host,
                  operation=i8(f.operation), permission_type=i8(f.permission_type))
            for f in filters)))
