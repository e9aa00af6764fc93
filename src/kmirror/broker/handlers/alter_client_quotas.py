"""AlterClientQuotas (key 49, v0-1): client quota entities written to the metadata log as
ClientQuotaRecords (Kafka's ClientQuotaControlManager). One result per entity, with the
entity as sent; a broker-only node forwards the request to the controller."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import ALTER_CONFIGS
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.client_quotas import QuotaAlteration
from kmirror.protocol.entities import build, nested


@api(49, "AlterClientQuotas", 0, 1, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if not services.authorization.authorize_cluster(ctx, ALTER_CONFIGS):  # Kafka: ALTER_CONFIGS on the cluster
        rt = ctx.response_type
        entry_cls, entity_cls = nested(rt, "EntryData"), nested(rt, "EntityData")
        return build(rt, throttle_time=datetime.timedelta(0), entries=tuple(
            build(entry_cls, error_code=ErrorCode.cluster_authorization_failed,
                  error_message="Cluster authorization failed.",
                  entity=tuple(build(entity_cls, entity_type=e.entity_type, entity_name=e.entity_name)
                               for e in entry.entity))
            for entry in request.entries))
    if services.metadata.forwarding:  # a broker-only node: the controller answers
        return await services.metadata.forward(request)
    alterations = [
        QuotaAlteration(
            entity=tuple((e.entity_type, e.entity_name) for e in entry.entity),
            ops=tuple((op.key, None if op.remove else float(op.value)) for op in entry.ops),
        )
        for entry in request.entries
    ]
    errors = await services.metadata.alter_client_quotas(alterations, validate_only=bool(request.validate_only))
    rt = ctx.response_type
    entry_cls, entity_cls = nested(rt, "EntryData"), nested(rt, "EntityData")
    entries = tuple(
        build(entry_cls, error_code=err.code, error_message=err.message if err.code != ErrorCode.none else None,
              entity=tuple(build(entity_cls, entity_type=t, entity_name=n) for t, n in alteration.entity))
        for alteration, err in zip(alterations, errors, strict=True)
    )
    return build(rt, throttle_time=datetime.timedelta(0), entries=entries)
