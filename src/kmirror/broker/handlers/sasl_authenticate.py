"""SaslAuthenticate (key 36, v0-2) outside a SASL exchange: ILLEGAL_SASL_STATE (see
sasl_handshake.py; the connection's `SaslServer` answers it during authentication)."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build
from kmirror.protocol.errors import ErrorCode


@api(36, "SaslAuthenticate", 0, 2)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    return build(ctx.response_type, error_code=ErrorCode.illegal_sasl_state,
                 error_message="Unexpected SaslAuthenticate: the connection is not in a SASL exchange",
                 auth_bytes=b"", session_lifetime=datetime.timedelta(0))
