"""An in-process stand-in for the ControllerChannel: requests go straight to the controller-plane
handlers of a `MetadataService`, at fixed versions, with no network."""

from __future__ import annotations

import inspect
from typing import Any

from kio.index import load_request_schema, load_response_schema

from kmirror.broker.api import RequestContext, load_handlers
from kmirror.broker.services import BrokerServices
from kmirror.ports import ManualClock
from kmirror.protocol.codec import RequestHeaderView
from kmirror.protocol.entities import build

VERSIONS = {1: 12, 19: 7, 59: 1, 62: 4, 63: 1, 67: 0, 43: 2, 56: 3}


class _Connection:
    def request_type(self, api_key: int) -> type[Any]:
        request_type: type[Any] = load_request_schema(api_key, VERSIONS[api_key])
        return request_type


class InProcessControllerChannel:
    def __init__(self, controller: Any, clock: ManualClock | None = None) -> None:
        self.controller = controller
        self.services = BrokerServices(
            node_id=controller.config.node_id, config=controller.config, registry=None,  # type: ignore[arg-type]
            clock=clock or ManualClock(), metadata=controller,
        )
        self._handlers = {d.api_key: d.handler for d in load_handlers("controller")}
        self.sent: list[Any] = []

    async def connection(self) -> _Connection:
        return _Connection()

    async def send(self, api_key: int, timeout_ms: int | None = None, **fields: Any) -> Any:
        return await self.forward(build(load_request_schema(api_key, VERSIONS[api_key]), **fields))

    async def forward(self, request: Any, timeout_ms: int | None = None) -> Any:
        api_key, version = int(request.__api_key__), int(request.__version__)
        self.sent.append(request)
        ctx = RequestContext(
            RequestHeaderView(api_key, version, 1, "broker"), load_response_schema(api_key, version), "127.0.0.1", 1,
            "CONTROLLER",
        )
        result = self._handlers[api_key](self.services, ctx, request)
        return await result if inspect.isawaitable(result) else result
