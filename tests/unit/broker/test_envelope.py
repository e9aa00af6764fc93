"""The controller's Envelope handler refuses what it must not run, before touching any service."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

from kio.schema.create_topics.v7.request import CreateTopicsRequest
from kio.schema.envelope.v0.request import EnvelopeRequest
from kio.schema.envelope.v0.response import EnvelopeResponse
from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext
from kmirror.broker.handlers.envelope import handle
from kmirror.client.protocol import encode_request
from kmirror.protocol.codec import RequestHeaderView
from kmirror.protocol.envelope import ForwardedPrincipal, encode_principal

ALICE = encode_principal(ForwardedPrincipal("User", "alice"))


def answer(request_data: bytes, principal: bytes | None = ALICE) -> Any:
    ctx = RequestContext(RequestHeaderView(58, 0, 1, "broker-1"), EnvelopeResponse, "127.0.0.1", 1, "CONTROLLER")
    request = EnvelopeRequest(request_data=request_data, request_principal=principal,
                              client_host_address=b"\x7f\x00\x00\x01")
    return asyncio.run(handle(None, ctx, request))  # type: ignore[arg-type]  # no service is reached


def test_only_the_token_writes_with_a_principal_are_run() -> None:
    create_topics = encode_request(CreateTopicsRequest(topics=(), timeout=datetime.timedelta(0), validate_only=False),
                                   7, "c")
    for data, principal in ((create_topics, ALICE), (b"\x00\x26\x00\x03", ALICE), (b"garbage", ALICE),
                            (create_topics, None), (create_topics, b"\x00\x07nonsense")):
        response = answer(data, principal)
        assert (response.error_code, response.response_data) == (ErrorCode.invalid_request, None)
