"""BrokerRegistration (key 62, controller plane): a broker joins the cluster, fenced, and gets
its broker epoch (Kafka ClusterControlManager.registerBroker)."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i64

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.result import ApiError
from kmirror.metadata.records import BrokerEndpoint
from kmirror.protocol.entities import build


@api(62, "BrokerRegistration", 0, 4, planes=("controller",))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    endpoints = tuple(
        BrokerEndpoint(lst.name, lst.host, int(lst.port), int(lst.security_protocol)) for lst in request.listeners
    )
    result = await services.controller_metadata.register_broker(
        int(request.broker_id), request.incarnation_id, endpoints, request.rack, cluster_id=request.cluster_id,
        log_dirs=tuple(d for d in getattr(request, "log_dirs", None) or () if d is not None),
    )
    if isinstance(result, ApiError):
        return build(ctx.response_type, throttle_time=datetime.timedelta(0), error_code=result.code, broker_epoch=i64(-1))
    return build(ctx.response_type, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, broker_epoch=i64(result))
