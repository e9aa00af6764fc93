"""AllocateProducerIds (key 67, controller plane): a broker's next block of producer ids."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller_service import MetadataOperationError
from kmirror.protocol.entities import build


@api(67, "AllocateProducerIds", 0, 0, planes=("controller",))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    try:
        first, size = await services.metadata.allocate_producer_ids(int(request.broker_id), int(request.broker_epoch))
    except MetadataOperationError as exc:
        return build(
            ctx.response_type, throttle_time=datetime.timedelta(0), error_code=exc.error.code,
            producer_id_start=i64(-1), producer_id_len=i32(0),
        )
    return build(
        ctx.response_type, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none,
        producer_id_start=i64(first), producer_id_len=i32(size),
    )
