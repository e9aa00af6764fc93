"""DeleteGroups (key 42): Empty groups only (NON_EMPTY_GROUP 68); offsets are tombstoned.
A group without DELETE is answered GROUP_AUTHORIZATION_FAILED (Kafka's authorization)."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import DELETE, GROUP
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


@api(42, "DeleteGroups", 0, 2)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    deletable = services.authorization.filter(ctx, DELETE, GROUP, request.groups_names)
    names = [g for g in request.groups_names if g in deletable]
    errors = {r.group_id: r.error for r in (await services.groups.delete_groups(names)).results} if names else {}
    rt = ctx.response_type
    Result = nested(rt, "DeletableGroupResult")
    return build(
        rt,
        throttle_time=datetime.timedelta(0),
        results=tuple(Result(group_id=g, error_code=errors.get(g, ErrorCode.group_authorization_failed))
                      for g in dict.fromkeys(request.groups_names)),
    )
