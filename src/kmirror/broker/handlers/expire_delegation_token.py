"""ExpireDelegationToken (key 40, v1-2; KIP-48): the token's owner or a renewer moves its
expiry to `expiry_time_period` ms from now (never past its max lifetime), or removes it at
once with a negative period (kmirror.metadata.controller.delegation_tokens)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.delegation_tokens import (
    NO_THROTTLE,
    forward,
    ms,
    requester,
    timestamp,
    token_requests_allowed,
)
from kmirror.broker.services import BrokerServices


@api(40, "ExpireDelegationToken", 1, 2, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if not token_requests_allowed(ctx):
        return ctx.response_type(error_code=ErrorCode.delegation_token_request_not_allowed,
                                 expiry_timestamp=timestamp(0), throttle_time=NO_THROTTLE)
    if services.metadata.forwarding:
        return await forward(services, ctx, request)
    result = await services.controller_metadata.expire_delegation_token(requester(ctx), bytes(request.hmac),
                                                                        ms(request.expiry_time_period))
    return ctx.response_type(error_code=result.error.code, expiry_timestamp=timestamp(result.expiry_timestamp_ms),
                             throttle_time=NO_THROTTLE)
