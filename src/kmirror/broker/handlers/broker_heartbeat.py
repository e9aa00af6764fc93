"""BrokerHeartbeat (key 63, controller plane): keeps a broker's session, unfences it once caught
up, and drives controlled shutdown (`want_shut_down` -> leaderships move -> `should_shut_down`); v1
reports the broker's failed log directories (KIP-858), v2 its cordoned ones (KIP-1066)."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build


def _cordoned(ids: Any) -> tuple[uuid.UUID, ...] | None:
    """The cordoned log directories a v2 heartbeat reports (KIP-1066; null: none reported)."""
    return None if ids is None else tuple(i for i in ids if i is not None)


@api(63, "BrokerHeartbeat", 0, 2, planes=("controller",))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    reply = await services.controller_metadata.broker_heartbeat(
        int(request.broker_id),
        int(request.broker_epoch),
        int(request.current_metadata_offset),
        bool(request.want_fence),
        bool(request.want_shut_down),
        _cordoned(getattr(request, "cordoned_log_dirs", None)),
        tuple(getattr(request, "offline_log_dirs", ()) or ()),
    )
    return build(
        ctx.response_type,
        throttle_time=datetime.timedelta(0),
        error_code=reply.error.code,
        is_caught_up=reply.is_caught_up,
        is_fenced=reply.is_fenced,
        should_shut_down=reply.should_shut_down,
    )
