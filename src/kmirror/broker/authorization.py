"""The authorizer applied to requests (Kafka's AuthHelper).

`RequestAuthorizer` asks the node's `StandardAuthorizer` about a request's principal
(`User:<SASL user>`, else `User:ANONYMOUS`) and client host, over the bindings of the node's
current metadata image. Without `authorizer.class.name` every request is allowed, exactly as
before the authorizer existed.

Which principal the cluster's own traffic has (docs/design/security.md): kmirror's
inter-broker and controller connections are PLAINTEXT and unauthenticated, so a request
arriving on the inter-broker listener (`inter.broker.listener.name`) or on a controller
listener (`controller.listener.names`) is authorized as the cluster itself, a super user.
Every other listener is checked. Clients that must be checked therefore connect through
another listener, and the cluster's listeners are kept out of their reach.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
import uuid
from collections.abc import Callable, Iterable, Mapping
from types import NoneType, UnionType
from typing import TYPE_CHECKING, Any

from kmirror.config.server import ServerConfig
from kmirror.metadata.authorizer import (
    AuthorizationResult,
    AuthorizerSettings,
    StandardAuthorizer,
    parse_super_users,
)
from kmirror.metadata.controller.acls import CLUSTER_NAME, AclOperation, ResourceType
from kmirror.metadata.image import AclBinding

if TYPE_CHECKING:
    from kmirror.broker.api import RequestContext

AclsSource = Callable[[], Mapping[uuid.UUID, AclBinding]]


def kafka_principal(ctx: RequestContext) -> str:
    return f"User:{ctx.principal}"


class RequestAuthorizer:
    def __init__(self, authorizer: StandardAuthorizer | None = None, acls: AclsSource | None = None,
                 privileged_listeners: Iterable[str] = ()) -> None:
        self._authorizer = authorizer
        self._acls = acls
        self.privileged_listeners = frozenset(privileged_listeners)

    @classmethod
    def from_config(cls, config: ServerConfig, acls: AclsSource) -> RequestAuthorizer:
        if not config.get("authorizer.class.name"):
            return cls()
        settings = AuthorizerSettings(parse_super_users(config.get("super.users")),
                                      bool(config.get("allow.everyone.if.no.acl.found")))
        privileged = (config.inter_broker_listener_name, *config.controller_listener_names)
        return cls(StandardAuthorizer(settings), acls, privileged)

    @property
    def enabled(self) -> bool:
        return self._authorizer is not None

    def _core(self) -> StandardAuthorizer:
        assert self._authorizer is not None and self._acls is not None
        self._authorizer.update(self._acls())
        return self._authorizer

    def unrestricted(self, ctx: RequestContext) -> bool:
        """Every operation is allowed: no authorizer, a cluster listener or a super user."""
        if self._authorizer is None or ctx.listener in self.privileged_listeners:
            return True
        return self._authorizer.is_super_user(kafka_principal(ctx))

    def authorize(self, ctx: RequestContext, operation: int, resource_type: int, name: str) -> bool:
        if self.unrestricted(ctx):
            return True
        result = self._core().authorize(kafka_principal(ctx), ctx.client_host, operation, resource_type, name)
        return result is AuthorizationResult.ALLOWED

    def authorize_cluster(self, ctx: RequestContext, operation: int) -> bool:
        return self.authorize(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def filter(self, ctx: RequestContext, operation: int, resource_type: int, names: Iterable[str]) -> set[str]:
        """The names of `names` the request may operate on (each asked once)."""
        if self.unrestricted(ctx):
            return set(names)
        core, principal = self._core(), kafka_principal(ctx)
        return {n for n in set(names)
                if core.authorize(principal, ctx.client_host, operation, resource_type, n) is AuthorizationResult.ALLOWED}

    def authorized_operations(self, ctx: RequestContext, resource_type: int, name: str,
                              operations: Iterable[int]) -> list[int]:
        """Those of `operations` the request may do on the resource (the `authorized_operations`
        fields; all of them without an authorizer)."""
        return [op for op in operations if self.authorize(ctx, op, resource_type, name)]

    def authorize_any(self, ctx: RequestContext, operation: int, resource_type: int) -> bool:
        if self.unrestricted(ctx):
            return True
        result = self._core().authorize_by_resource_type(kafka_principal(ctx), ctx.client_host, operation,
                                                         resource_type)
        return result is AuthorizationResult.ALLOWED


ALLOW_ALL = RequestAuthorizer()

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                                                AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE)
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = (
    AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE)
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, CLUSTER_MIRROR = (
    ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID,
    ResourceType.CLUSTER_MIRROR)


def denied_response(response_type: type[Any], error_code: int, message: str | None = None) -> Any:
    """A response whose every error code is `error_code` and whose lists are empty: the answer
    to a request refused as a whole (Kafka's `getErrorResponse` for APIs with a top-level
    error code)."""
    return _filled(response_type, int(error_code), message)


def _filled(cls: type[Any], error_code: int, message: str | None) -> Any:
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name == "error_code":
            values[f.name] = _code(hints[f.name], error_code)
        elif f.name == "error_message":
            values[f.name] = message
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            values[f.name] = _empty(hints[f.name], error_code, message)
    return cls(**values)


def _code(hint: Any, error_code: int) -> Any:
    try:
        return hint(error_code) if isinstance(hint, type) else error_code
    except ValueError:  # a code kio's ErrorCode does not list (KIP-1279's)
        return error_code


def _empty(hint: Any, error_code: int, message: str | None) -> Any:
    origin = typing.get_origin(hint)
    if origin is tuple:
        return ()
    if origin in (UnionType, typing.Union) and NoneType in typing.get_args(hint):
        return None
    if not isinstance(hint, type):
        raise TypeError(f"no empty value for {hint!r}")
    if issubclass(hint, datetime.timedelta):
        return datetime.timedelta(0)
    if issubclass(hint, bool):
        return False
    if issubclass(hint, int):
        return hint(0)
    if issubclass(hint, str):
        return ""
    if issubclass(hint, bytes):
        return b""
    if issubclass(hint, uuid.UUID):
        return uuid.UUID(int=0)
    if dataclasses.is_dataclass(hint):
        return _filled(hint, error_code, message)
    raise TypeError(f"no empty value for {hint!r}")
