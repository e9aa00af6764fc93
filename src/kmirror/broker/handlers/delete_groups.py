"""DeleteGroups (key 42): Empty groups only (NON_EMPTY_GROUP 68); offsets are tombstoned."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested


@api(42, "DeleteGroups", 0, 2)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    result = await services.groups.delete_groups(list(request.groups_names))
    rt = ctx.response_type
    Result = nested(rt, "DeletableGroupResult")
    return build(
        rt,
        throttle_time=datetime.timedelta(0),
        results=tuple(Result(group_id=r.group_id, error_code=r.error) for r in result.results),
    )
