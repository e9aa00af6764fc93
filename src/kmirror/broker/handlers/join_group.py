"""JoinGroup (key 11). Delayed: answered when the group's rebalance completes (KIP-394
MEMBER_ID_REQUIRED first from v4)."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested


def client_host(ctx: RequestContext) -> str:
    """Kafka reports a member's host as `InetAddress.toString()`: "/<ip>"."""
    return ctx.client_host if ctx.client_host.startswith("/") else f"/{ctx.client_host}"


def millis(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    return int(value)


@api(11, "JoinGroup", 0, 9)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    v = ctx.api_version
    session_ms = millis(request.session_timeout)
    rebalance_ms = millis(request.rebalance_timeout) if v >= 1 else session_ms
    result = await services.groups.join_group(
        group_id=request.group_id,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        client_id=ctx.header.client_id or "",
        client_host=client_host(ctx),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type=request.protocol_type,
        protocols=[(p.name, p.metadata) for p in request.protocols],
        require_known_member_id=v >= 4,
        supports_skip_assignment=v >= 9,
    )
    rt = ctx.response_type
    Member = nested(rt, "JoinGroupResponseMember")
    return build(
        rt,
        throttle_time=datetime.timedelta(0),
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name if v >= 7 else (result.protocol_name or ""),
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=tuple(
            build(Member, member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata)
            for m in result.members
        ),
    )
