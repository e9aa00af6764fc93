"""SaslHandshake (key 17, v0-1) outside a SASL exchange.

On a SASL listener the connection's `SaslServer` answers the handshake before
authentication; a request reaching this handler came on a listener without SASL or after
authentication by a client that cannot re-authenticate (its SaslAuthenticate was v0; KIP-368
re-authentication is the connection's `SaslServer`'s): ILLEGAL_SASL_STATE, as Kafka's KafkaApis.
"""

from __future__ import annotations

from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build
from kmirror.protocol.errors import ErrorCode


@api(17, "SaslHandshake", 0, 1)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    return build(ctx.response_type, error_code=ErrorCode.illegal_sasl_state, mechanisms=())
