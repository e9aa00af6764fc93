"""Heartbeat (key 12): keeps a member's session; tells it when a rebalance is on (27)."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build


@api(12, "Heartbeat", 0, 4)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    error = services.groups.heartbeat(
        group_id=request.group_id, generation_id=request.generation_id, member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
    )
    return build(ctx.response_type, throttle_time=datetime.timedelta(0), error_code=error)
