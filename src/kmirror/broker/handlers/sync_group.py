"""SyncGroup (key 14): the leader's assignment, distributed once persisted."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build


@api(14, "SyncGroup", 0, 5)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    result = await services.groups.sync_group(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        protocol_type=getattr(request, "protocol_type", None),
        protocol_name=getattr(request, "protocol_name", None),
        assignments={a.member_id: a.assignment for a in request.assignments},
        group_instance_id=getattr(request, "group_instance_id", None),
    )
    return build(
        ctx.response_type,
        throttle_time=datetime.timedelta(0),
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )
