"""CreateMirror (key 94): validates and stores the mirror's configs through the controller."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import CREATE
from kmirror.broker.mirror_authorization import mirror_refusal
from kmirror.broker.services import BrokerServices
from kmirror.metadata.mirrors import MIRRORING_DISABLED_MESSAGE, UNSUPPORTED_VERSION_CODE, mirroring_enabled
from kmirror.protocol.entities import build
from kmirror.protocol.mirror.registry import schemas


@api(94, "CreateMirror", 0, 0, schemas=schemas(94), planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    refused = mirror_refusal(services, ctx, CREATE, request.mirror_name)  # KIP-1279: Create on the ClusterMirror
    if refused is not None:
        return refused
    if not mirroring_enabled(services.metadata.image):
        return build(rt, throttle_time=datetime.timedelta(0), error_code=UNSUPPORTED_VERSION_CODE,
                     error_message=MIRRORING_DISABLED_MESSAGE)
    if services.metadata.forwarding:
        return await services.metadata.forward(request)
    error = await services.metadata.create_mirror(request.mirror_name, {c.name: c.value for c in request.config})
    return build(rt, throttle_time=datetime.timedelta(0), error_code=int(error.code), error_message=error.message)
