"""DescribeClientQuotas (key 48, v0-1): the quota entities of the metadata image matching a
filter (Kafka's ClientQuotasImage.describe); served by any broker from its image."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import f64

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.client_quotas import QuotaFilterComponent
from kmirror.protocol.entities import build, nested


@api(48, "DescribeClientQuotas", 0, 1)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    components = [QuotaFilterComponent(c.entity_type, int(c.match_type), c.match) for c in request.components]
    described = services.metadata.describe_client_quotas(components, bool(request.strict))
    rt = ctx.response_type
    if described.error.code != ErrorCode.none:
        return build(rt, throttle_time=datetime.timedelta(0), error_code=described.error.code,
                     error_message=described.error.message, entries=None)
    entry_cls, entity_cls, value_cls = nested(rt, "EntryData"), nested(rt, "EntityData"), nested(rt, "ValueData")
    entries = tuple(
        build(entry_cls,
              entity=tuple(build(entity_cls, entity_type=t, entity_name=n) for t, n in entity),
              values=tuple(build(value_cls, key=k, value=f64(v)) for k, v in sorted(values.items())))
        for entity, values in described.entries
    )
    return build(rt, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, error_message=None,
                 entries=entries)
