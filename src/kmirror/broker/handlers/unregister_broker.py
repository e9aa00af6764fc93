"""UnregisterBroker (key 64, v0; KIP-500): remove a broker's registration, as
`kafka-cluster.sh unregister` does to decommission a broker that is gone. The controller moves
its leaderships and ISR memberships away first; an unknown id is BROKER_ID_NOT_REGISTERED.
A broker forwards the request to the controller, as Kafka's brokers do.
"""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build


@api(64, "UnregisterBroker", 0, 0, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if services.metadata.forwarding:  # a broker-only node: the controller answers
        return await services.broker_metadata.forward(request)
    error = await services.controller_metadata.unregister_broker(int(request.broker_id))
    return build(ctx.response_type, throttle_time=datetime.timedelta(0), error_code=error.code,
                 error_message=error.message)
