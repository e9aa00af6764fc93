"""DescribeDelegationToken (key 41, v1-3; KIP-48, KIP-373): the tokens of the owners asked
for (null: every owner; empty: none), from this node's metadata image, with their HMACs. A
token is shown to its owner, its requester and its renewers, and to a principal with
DESCRIBE on the token or DESCRIBE_TOKENS on its owner (every token, without an authorizer)."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i64

from kmirror.broker.api import RequestContext, api
from kmirror.broker.delegation_tokens import NO_THROTTLE, requester, token_requests_allowed
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.acls import AclOperation, ResourceType
from kmirror.metadata.controller.delegation_tokens import describable_tokens
from kmirror.metadata.records import DelegationTokenRecord
from kmirror.protocol.entities import build, nested
from kmirror.security.delegation_token import KafkaPrincipal, token_hmac


@api(41, "DescribeDelegationToken", 1, 3)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    secret = services.config.get("delegation.token.secret.key") or None
    if not token_requests_allowed(ctx):
        return rt(error_code=ErrorCode.delegation_token_request_not_allowed, tokens=(), throttle_time=NO_THROTTLE)
    if secret is None:
        return rt(error_code=ErrorCode.delegation_token_auth_disabled, tokens=(), throttle_time=NO_THROTTLE)
    owners = None if request.owners is None else [f"{o.principal_type}:{o.principal_name}" for o in request.owners]
    me = requester(ctx)

    def visible(token: DelegationTokenRecord) -> bool:
        if me in (token.owner, token.requester) or me in token.renewers:
            return True
        return (services.authorization.authorize(ctx, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN,
                                                 token.token_id, log_if_denied=False)
                or services.authorization.authorize(ctx, AclOperation.DESCRIBE_TOKENS, ResourceType.USER,
                                                    token.owner, log_if_denied=False))

    token_cls, renewer_cls = nested(rt, "DescribedDelegationToken"), nested(rt, "DescribedDelegationTokenRenewer")

    def described(token: DelegationTokenRecord) -> Any:
        owner, by = KafkaPrincipal.parse(token.owner), KafkaPrincipal.parse(token.requester)
        renewers = tuple(renewer_cls(principal_type=r.principal_type, principal_name=r.name)
                         for r in map(KafkaPrincipal.parse, token.renewers))
        return build(token_cls, principal_type=owner.principal_type, principal_name=owner.name,
                     token_requester_principal_type=by.principal_type, token_requester_principal_name=by.name,
                     issue_timestamp=i64(token.issue_timestamp), expiry_timestamp=i64(token.expiration_timestamp),
                     max_timestamp=i64(token.max_timestamp), token_id=token.token_id,
                     hmac=token_hmac(secret, token.token_id), renewers=renewers)

    tokens = tuple(described(t) for t in describable_tokens(services.metadata.image, owners) if visible(t))
    return rt(error_code=ErrorCode.none, tokens=tokens, throttle_time=NO_THROTTLE)
