"""RenewDelegationToken (key 39, v1-2; KIP-48): the token's owner or a renewer pushes its
expiry `renew_period` ms (-1: delegation.token.expiry.time.ms) ahead, never past its max
lifetime (kmirror.metadata.controller.delegation_tokens)."""

from __future__ import annotations

from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.delegation_tokens import expiry_answer
from kmirror.broker.services import BrokerServices


@api(39, "RenewDelegationToken", 1, 2, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    return await expiry_answer(services, ctx, request, request.renew_period,
                               lambda controller, *args: controller.renew_delegation_token(*args))
