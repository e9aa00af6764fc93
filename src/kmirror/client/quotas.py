"""Admin methods for client quotas (Kafka Admin `alterClientQuotas`, `describeClientQuotas`).

`QuotaAdmin` is mixed into `kmirror.client.admin.Admin`; it needs `self.cluster`. An entity is
a mapping `entity_type -> entity_name` (`"user"`, `"client-id"`, `"ip"`; a None name is the
default entity). DescribeClientQuotas is read from any broker's metadata; AlterClientQuotas
goes where other admin writes go (a broker forwards it to the controller).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kio.static.primitive import f64, i8

from kmirror.client.cluster import Cluster
from kmirror.client.errors import check
from kmirror.protocol.entities import build, nested

DESCRIBE_CLIENT_QUOTAS, ALTER_CLIENT_QUOTAS = 48, 49
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

QuotaEntity = Mapping[str, str | None]


@dataclass(frozen=True, slots=True)
class QuotaFilterComponent:
    """Kafka's ClientQuotaFilterComponent: `ofEntity` (a name), `ofDefaultEntity` (None with
    `default=True`) or `ofEntityType` (None)."""

    entity_type: str
    name: str | None = None
    default: bool = False

    def match_type(self) -> int:
        if self.name is not None:
            return MATCH_EXACT
        return MATCH_DEFAULT if self.default else MATCH_SPECIFIED


def _entity_label(entity: QuotaEntity) -> str:
    return ", ".join(f"{t}={n if n is not None else '<default>'}" for t, n in entity.items())


class QuotaAdmin:
    cluster: Cluster

    async def alter_client_quotas(
        self, entity: QuotaEntity, ops: Mapping[str, float | None], *, validate_only: bool = False
    ) -> None:
        """Set (a float) or remove (None) quota keys of one entity; raises KafkaError."""
        conn = await self.cluster.controller_connection()
        rt = conn.request_type(ALTER_CLIENT_QUOTAS)
        entry_cls, entity_cls, op_cls = nested(rt, "EntryData"), nested(rt, "EntityData"), nested(rt, "OpData")
        request = build(rt, validate_only=validate_only, entries=(build(
            entry_cls,
            entity=tuple(build(entity_cls, entity_type=t, entity_name=n) for t, n in entity.items()),
            ops=tuple(build(op_cls, key=k, value=f64(0.0 if v is None else float(v)), remove=v is None)
                      for k, v in ops.items()),
        ),))
        response = await conn.send(request)
        for e in response.entries:
            check(e.error_code, e.error_message, _entity_label(entity))

    async def describe_client_quotas(
        self, components: Sequence[QuotaFilterComponent], *, strict: bool = True
    ) -> list[tuple[dict[str, str | None], dict[str, float]]]:
        """`(entity, {key: value})` of every entity matching the filter (Kafka's ClientQuotaFilter;
        `strict` is `containsOnly`)."""
        conn = await self.cluster.any_connection()
        rt = conn.request_type(DESCRIBE_CLIENT_QUOTAS)
        component_cls = nested(rt, "ComponentData")
        response = await conn.send(build(rt, strict=strict, components=tuple(
            build(component_cls, entity_type=c.entity_type, match_type=i8(c.match_type()), match=c.name)
            for c in components)))
        check(response.error_code, response.error_message, "DescribeClientQuotas")
        return [({e.entity_type: e.entity_name for e in entry.entity}, {v.key: float(v.value) for v in entry.values})
                for entry in response.entries or ()]
