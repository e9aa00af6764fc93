"""CreateDelegationToken (key 38, v1-3; KIP-48, KIP-373): a token for the requester, or for
another owner with CREATE_TOKENS on that user. The active controller draws the id and writes
the token (kmirror.metadata.controller.delegation_tokens); the answer carries the HMAC."""

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
from kmirror.metadata.controller.acls import AclOperation, ResourceType
from kmirror.protocol.entities import build
from kmirror.security.delegation_token import USER_TYPE, KafkaPrincipal


@api(38, "CreateDelegationToken", 1, 3, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    me = requester(ctx)
    owner_name = getattr(request, "owner_principal_name", None) or ""  # v3 may name another owner
    owner_type = getattr(request, "owner_principal_type", None) or USER_TYPE
    owner = f"{owner_type}:{owner_name}" if owner_name else me

    def refused(code: ErrorCode) -> Any:
        return _answer(ctx, code, owner, me)

    if not token_requests_allowed(ctx):
        return refused(ErrorCode.delegation_token_request_not_allowed)
    if owner_type != USER_TYPE:
        return refused(ErrorCode.invalid_principal_type)
    if owner != me and not services.authorization.authorize(ctx, AclOperation.CREATE_TOKENS, ResourceType.USER, owner):
        return refused(ErrorCode.delegation_token_authorization_failed)
    if services.metadata.forwarding:
        return await forward(services, ctx, request)
    renewers = [KafkaPrincipal(r.principal_type, r.principal_name) for r in request.renewers]
    created = await services.controller_metadata.create_delegation_token(me, owner, renewers, ms(request.max_lifetime))
    if created.token is None:
        return refused(created.error.code)
    token = created.token
    return _answer(ctx, ErrorCode.none, owner, me, token.issue_timestamp, token.expiration_timestamp,
                   token.max_timestamp, token.token_id, created.hmac)


def _answer(ctx: RequestContext, code: ErrorCode, owner: str, me: str, issued: int = 0, expiry: int = 0,
            max_timestamp: int = 0, token_id: str = "", mac: bytes = b"") -> Any:
    owner_principal, requester_principal = KafkaPrincipal.parse(owner), KafkaPrincipal.parse(me)
    return build(
        ctx.response_type, error_code=code, principal_type=owner_principal.principal_type, principal_name=owner_principal.name,
        token_requester_principal_type=requester_principal.principal_type,
        token_requester_principal_name=requester_principal.name, issue_timestamp=timestamp(issued),
        expiry_timestamp=timestamp(expiry), max_timestamp=timestamp(max_timestamp), token_id=token_id, hmac=mac,
        throttle_time=NO_THROTTLE)
