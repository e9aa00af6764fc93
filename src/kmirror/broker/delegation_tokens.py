"""What the delegation token APIs (38-41, KIP-48) share: who may ask at all, and the
conversions between the wire's principals and times and kmirror's.

As Kafka's `KafkaApis.allowTokenRequests`: a connection authenticated by a delegation token
may not create, renew, expire or describe tokens, nor may one that is not authenticated at
all (a PLAINTEXT listener, or TLS without a client certificate, whose principal is
ANONYMOUS). A broker-only node forwards creation, renewal and expiry to the active controller
in an Envelope that carries the client's principal; the controller checks the same rule on
that principal."""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext
from kmirror.broker.quotas.client_quota_manager import ANONYMOUS
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.delegation_tokens import TokenExpiry
from kmirror.metadata.controller_service import MetadataService
from kmirror.protocol.envelope import ForwardedPrincipal
from kmirror.security.delegation_token import USER_TYPE


def token_requests_allowed(ctx: RequestContext) -> bool:
    return not ctx.token_authenticated and ctx.principal != ANONYMOUS


def requester(ctx: RequestContext) -> str:
    """The request's principal as a token records it (`User:alice`)."""
    return f"{USER_TYPE}:{ctx.principal}"


def forwarded_principal(ctx: RequestContext) -> ForwardedPrincipal:
    return ForwardedPrincipal(USER_TYPE, ctx.principal, ctx.token_authenticated)


async def forward(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    """A broker-only node's answer: the controller's, acting as the client's principal."""
    return await services.broker_metadata.forward_as(request, forwarded_principal(ctx), ctx.client_host,
                                                     ctx.header.client_id)


def ms(value: datetime.timedelta) -> int:
    return int(value / datetime.timedelta(milliseconds=1))


def timestamp(ms_since_epoch: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms_since_epoch / 1000, tz=datetime.UTC)


NO_THROTTLE = datetime.timedelta(0)


ExpiryChange = Callable[[MetadataService, str, bytes, int], Awaitable[TokenExpiry]]
"""A controller's renewal or expiry: (controller, principal, HMAC, period in ms) -> the outcome."""


async def expiry_answer(services: BrokerServices, ctx: RequestContext, request: Any, period: datetime.timedelta,
                        change: ExpiryChange) -> Any:
    """RenewDelegationToken's or ExpireDelegationToken's answer: the error and the new expiry."""
    if not token_requests_allowed(ctx):
        return ctx.response_type(error_code=ErrorCode.delegation_token_request_not_allowed,
                                 expiry_timestamp=timestamp(0), throttle_time=NO_THROTTLE)
    if services.metadata.forwarding:
        return await forward(services, ctx, request)
    result = await change(services.controller_metadata, requester(ctx), bytes(request.hmac), ms(period))
    return ctx.response_type(error_code=result.error.code, expiry_timestamp=timestamp(result.expiry_timestamp_ms),
                             throttle_time=NO_THROTTLE)
