"""Admin methods for ACLs (Kafka Admin `describeAcls`, `createAcls`, `deleteAcls`).

`AclAdmin` is mixed into `kmirror.client.admin.Admin`; it needs `self.cluster`. Codes are
Kafka's (ResourceType, PatternType, AclOperation, AclPermissionType). DescribeAcls is read
from any broker's metadata; CreateAcls goes where other admin writes go (a broker forwards
it to the controller).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

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


class AclAdmin:
    cluster: Cluster

    async def describe_acls(self) -> list[AclBinding]:
        """Every binding of the cluster (the match-all filter)."""
        conn = await self.cluster.any_connection()
        response = await conn.send(conn.build_request(
            DESCRIBE_ACLS, resource_type_filter=i8(ANY), resource_name_filter=None, pattern_type_filter=i8(ANY),
            principal_filter=None, host_filter=None, operation=i8(ANY), permission_type=i8(ANY)))
        check(response.error_code, response.error_message, "DescribeAcls")
        return sorted(
            (AclBinding(int(r.resource_type), r.resource_name, int(r.pattern_type), a.principal, a.host,
                        int(a.operation), int(a.permission_type))
             for r in response.resources for a in r.acls),
            key=lambda b: (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation,
                           b.permission_type))

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
        conn = await self.cluster.controller_connection()
        rt = conn.request_type(DELETE_ACLS)
        Filter = nested(rt, "DeleteAclsFilter")
        response = await conn.send(build(rt, filters=tuple(
            build(Filter, resource_type_filter=i8(b.resource_type), resource_name_filter=b.resource_name,
                  pattern_type_filter=i8(b.pattern_type), principal_filter=b.principal, host_filter=b.host,
                  operation=i8(b.operation), permission_type=i8(b.permission_type))
            for b in wanted)))
        return {b: (KafkaError(int(r.error_code), r.error_message, "DeleteAcls") if int(r.error_code) else None)
                for b, r in zip(wanted, response.filter_results, strict=True)}
