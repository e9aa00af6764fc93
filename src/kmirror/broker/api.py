"""Handler registration.

A handler module declares what it serves with `@api(...)`; `load_handlers()` imports every
module of `kmirror.broker.handlers` so adding an API never edits a shared list. Each API belongs
to a plane: "broker" APIs are served on the client listeners, "controller" APIs (KRaft's
BrokerRegistration, BrokerHeartbeat, AlterPartition, the metadata log Fetch...) on the
listeners named by `controller.listener.names`. An API may be registered on both planes
with different handlers (e.g. Fetch). A handler is
`handler(services, ctx, request) -> response | Awaitable[response]` and only translates:
request -> calls on narrow domain interfaces -> response. Expected outcomes come back from
the domain as values and become error codes here. Each handler is registered behind its
API's authorization policy (`kmirror.broker.api_authorization`).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kmirror.broker.api_authorization import guarded
from kmirror.protocol.codec import RequestHeaderView
from kmirror.protocol.registry import ApiRegistry, ApiSpec, SchemaLookup, kio_schemas


@dataclass(frozen=True, slots=True)
class RequestContext:
    header: RequestHeaderView
    response_type: type[Any]
    client_host: str
    connection_id: int
    listener: str = "PLAINTEXT"
    principal: str = "ANONYMOUS"
    """The authenticated user (SASL), else Kafka's ANONYMOUS: the `user` of client quotas."""
    token_authenticated: bool = False
    """Authenticated by a delegation token (KIP-48), which may not ask for tokens itself."""

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def request_name(self) -> str:
        """The API's Kafka name (`Produce`, `Fetch`, `DescribeMirrors`, Kafka's `ApiKeys.name`):
        its response schema's, less `Response`."""
        return self.response_type.__name__.removesuffix("Response")


Handler = Callable[[Any, RequestContext, Any], Any | Awaitable[Any]]


@dataclass(frozen=True)
class HandlerDef:
    api_key: int
    name: str
    min_version: int
    max_version: int
    handler: Handler
    schemas: SchemaLookup | None
    response_header_v0: bool
    advertised: bool
    plane: str = "broker"


PLANES = ("broker", "controller")
_DEFS: dict[tuple[str, int], HandlerDef] = {}


def api(
    api_key: int,
    name: str,
    min_version: int,
    max_version: int,
    *,
    schemas: SchemaLookup | None = None,
    response_header_v0: bool = False,
    advertised: bool = True,
    planes: tuple[str, ...] = ("broker",),
) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        for plane in planes:
            if plane not in PLANES:
                raise ValueError(f"unknown plane {plane!r}")
            _DEFS[(plane, api_key)] = HandlerDef(
                api_key, name, min_version, max_version, guarded(api_key, plane, fn), schemas, response_header_v0,
                advertised, plane
            )
        return fn

    return register


def load_handlers(plane: str = "broker") -> list[HandlerDef]:
    # Imported here: every handler module imports this one to register itself (`@api`).
    import kmirror.broker.handlers as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"{pkg.__name__}.{mod.name}")
    return sorted((d for (p, _), d in _DEFS.items() if p == plane), key=lambda d: d.api_key)


def build_registry(defs: list[HandlerDef] | None = None, plane: str = "broker") -> ApiRegistry:
    registry = ApiRegistry()
    for d in defs if defs is not None else load_handlers(plane):
        registry.register(
            ApiSpec(
                api_key=d.api_key,
                name=d.name,
                min_version=d.min_version,
                max_version=d.max_version,
                handler=d.handler,
                schemas=d.schemas or kio_schemas(d.api_key),
                response_header_v0=d.response_header_v0,
                advertised=d.advertised,
            )
        )
    return registry
