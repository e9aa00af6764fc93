"""LeaveGroup (key 13): one member (v0-2) or a batch of members (v3+, KIP-345)."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


@api(13, "LeaveGroup", 0, 5)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if ctx.api_version < 3:
        members: list[tuple[str, str | None]] = [(request.member_id, None)]
    else:
        members = [(m.member_id, m.group_instance_id) for m in request.members]
    result = await services.groups.leave_group(group_id=request.group_id, members=members)
    rt = ctx.response_type
    if ctx.api_version < 3:
        error = result.error
        if error == ErrorCode.none and result.members:
            error = result.members[0].error
        return build(rt, throttle_time=datetime.timedelta(0), error_code=error)
    MemberResponse = nested(rt, "MemberResponse")
    return build(
        rt,
        throttle_time=datetime.timedelta(0),
        error_code=result.error,
        members=tuple(
            MemberResponse(member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error)
            for m in result.members
        ),
    )
