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

Every decision asked of the authorizer (super users' included, whose rule is SuperUser) is
recorded by its sensors and written to the audit log at the level its `Action` calls for
(`kmirror.broker.authorizer_audit`). As Kafka's AuthHelper: `authorize` and `filter` log
both decisions unless told a denial is not a refusal (`log_if_denied=False`: a probe, or a
listing that leaves the resource out); `filter` counts how often the request names each
resource (`resourceRefCount`); `authorized_operations` logs neither; `authorize_any` asks
about a name no binding can be about first (Kafka's `authorizeByResourceType`: reference
count 0, a denial not logged).
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from types import NoneType, UnionType
from typing import TYPE_CHECKING, Any

from kmirror.broker.authorizer_audit import Action, log_audit_message
from kmirror.broker.authorizer_sensors import AuthorizerSensors
from kmirror.config.server import ServerConfig
from kmirror.metadata.authorizer import (
    HARDCODED_NAME,
    AuthorizationResult,
    AuthorizerSettings,
    StandardAuthorizer,
    parse_super_users,
)
from kmirror.metadata.controller.acls import CLUSTER_NAME, AclOperation, ResourceType
from kmirror.metadata.image import AclBinding
from kmirror.ports import Clock

if TYPE_CHECKING:
    from kmirror.broker.api import RequestContext

AclsSource = Callable[[], Mapping[uuid.UUID, AclBinding]]


def kafka_principal(ctx: RequestContext) -> str:
    return f"User:{ctx.principal}"


class RequestAuthorizer:
    def __init__(self, authorizer: StandardAuthorizer | None = None, acls: AclsSource | None = None,
                 privileged_listeners: Iterable[str] = (), sensors: AuthorizerSensors | None = None) -> None:
        self._authorizer = authorizer
        self._acls = acls
        self.privileged_listeners = frozenset(privileged_listeners)
        self.sensors = sensors

    @classmethod
    def from_config(cls, config: ServerConfig, acls: AclsSource, clock: Clock) -> RequestAuthorizer:
        if not config.get("authorizer.class.name"):
            return cls()
        settings = AuthorizerSettings(parse_super_users(config.get("super.users")),
                                      bool(config.get("allow.everyone.if.no.acl.found")))
        privileged = (config.inter_broker_listener_name, *config.controller_listener_names)
        return cls(StandardAuthorizer(settings), acls, privileged, AuthorizerSensors(clock))

    @property
    def enabled(self) -> bool:
        return self._authorizer is not None

    def acl_count(self) -> int:
        """The bindings the authorizer decides over now (Kafka's `aclCount`)."""
        return 0 if self._acls is None else len(self._acls())

    def _core(self) -> StandardAuthorizer:
        assert self._authorizer is not None and self._acls is not None
        self._authorizer.update(self._acls())
        return self._authorizer

    def unrestricted(self, ctx: RequestContext) -> bool:
        """The authorizer is not asked: there is none, or the request came on a cluster listener."""
        return self._authorizer is None or ctx.listener in self.privileged_listeners

    def is_super_user(self, ctx: RequestContext) -> bool:
        return self._authorizer is not None and self._authorizer.is_super_user(kafka_principal(ctx))

    def _decide(self, ctx: RequestContext, core: StandardAuthorizer, action: Action) -> bool:
        principal = kafka_principal(ctx)
        rule = core.matching_rule(principal, ctx.client_host, action.operation, action.resource_type,
                                  action.resource_name)
        if self.sensors is not None:
            self.sensors.record(rule.result)
        log_audit_message(principal, ctx.client_host, ctx.request_name, action, rule)
        return rule.result is AuthorizationResult.ALLOWED

    def authorize(self, ctx: RequestContext, operation: int, resource_type: int, name: str, *,
                  log_if_denied: bool = True) -> bool:
        if self.unrestricted(ctx):
            return True
        return self._decide(ctx, self._core(), Action(operation, resource_type, name, log_if_denied=log_if_denied))

    def authorize_cluster(self, ctx: RequestContext, operation: int, *, log_if_denied: bool = True) -> bool:
        return self.authorize(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied)

    def filter(self, ctx: RequestContext, operation: int, resource_type: int, names: Iterable[str], *,
               log_if_denied: bool = True) -> set[str]:
        """The names of `names` the request may operate on (each asked once)."""
        if self.unrestricted(ctx):
            return set(names)
        core = self._core()
        return {name for name, count in Counter(names).items()
                if self._decide(ctx, core, Action(operation, resource_type, name, count,
                                                  log_if_denied=log_if_denied))}

    def authorized_operations(self, ctx: RequestContext, resource_type: int, name: str,
                              operations: Iterable[int]) -> list[int]:
        """Those of `operations` the request may do on the resource (the `authorized_operations`
        fields; all of them without an authorizer). They grant nothing: audit-logged at TRACE."""
        if self.unrestricted(ctx):
            return list(operations)
        core = self._core()
        return [op for op in operations
                if self._decide(ctx, core, Action(op, resource_type, name, 1, log_if_allowed=False,
                                                  log_if_denied=False))]

    def authorize_any(self, ctx: RequestContext, operation: int, resource_type: int) -> bool:
        if self.unrestricted(ctx):
            return True
        core = self._core()
        if self._decide(ctx, core, Action(operation, resource_type, HARDCODED_NAME, 0, log_if_denied=False)):
            return True
        result = core.authorize_by_resource_type(kafka_principal(ctx), ctx.client_host, operation, resource_type)
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
