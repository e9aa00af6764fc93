"""Envelope (key 58, v0; KIP-590), controller plane: a request a broker-only node forwards
on behalf of its client, run here as that client's principal, and its response sent back
embedded. Only the APIs whose outcome depends on the principal are forwarded this way
(the delegation token APIs); any other embedded API is INVALID_REQUEST, a principal or
request that does not decode is INVALID_REQUEST too (Kafka's `handleEnvelope`)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api, build_registry
from kmirror.broker.services import BrokerServices
from kmirror.protocol.codec import DecodedRequest, MalformedRequest, decode_request, encode_response
from kmirror.protocol.envelope import ENVELOPE, decode_principal, host_text
from kmirror.protocol.registry import ApiRegistry

log = logging.getLogger(__name__)

FORWARDED_AS_PRINCIPAL = frozenset({38, 39, 40})  # Create, Renew and ExpireDelegationToken


@functools.cache
def _controller_apis() -> ApiRegistry:
    return build_registry(plane="controller")


@api(ENVELOPE, "Envelope", 0, 0, planes=("controller",))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    try:
        principal = decode_principal(bytes(request.request_principal or b""))
        inner = decode_request(_controller_apis(), bytes(request.request_data))
    except (ValueError, MalformedRequest) as exc:
        log.info("Envelope from %s refused: %s", ctx.client_host, exc)
        return rt(response_data=None, error_code=ErrorCode.invalid_request)
    if not isinstance(inner, DecodedRequest) or inner.header.api_key not in FORWARDED_AS_PRINCIPAL:
        return rt(response_data=None, error_code=ErrorCode.invalid_request)
    inner_ctx = dataclasses.replace(
        ctx, header=inner.header, response_type=inner.spec.response_type(inner.header.api_version),
        client_host=host_text(bytes(request.client_host_address)) or ctx.client_host,
        principal=principal.name, token_authenticated=principal.token_authenticated)
    result = inner.spec.handler(services, inner_ctx, inner.body)
    if inspect.isawaitable(result):
        result = await result
    frame = encode_response(inner.spec, inner.header.api_version, inner.header.correlation_id, result)
    return rt(response_data=bytes(frame[4:]), error_code=ErrorCode.none)
