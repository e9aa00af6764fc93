"""ExpireDelegationToken (key 40, v1-2; KIP-48): the token's owner or a renewer moves its
expiry to `expiry_time_period` ms from now (never past its max lifetime), or removes it at
once with a negative period (kmirror.metadata.controller.delegation_tokens)."""

from __future__ import annotations

from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.delegation_tokens import expiry_answer
from kmirror.broker.services import BrokerServices


@api(40, "ExpireDelegationToken", 1, 2, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    return await expiry_answer(services, ctx, request, request.expiry_time_period,
                               lambda controller, *args: controller.expire_delegation_token(*args))
