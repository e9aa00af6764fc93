"""Handler tests with the authorizer on: services whose requests on PLAINTEXT are checked
(the cluster listener is INTERNAL) and ACLs written through the controller."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from typing import Any

from kmirror.broker.authorization import RequestAuthorizer
from kmirror.broker.authorizer_sensors import AuthorizerSensors
from kmirror.metadata.authorizer import AuthorizerSettings, StandardAuthorizer, parse_super_users
from kmirror.metadata.controller.acls import AclCreation, AclOperation, AclPermissionType, PatternType
from kmirror.metadata.image import AclBinding

CLUSTER_LISTENER = "INTERNAL"


def enable_authorizer(services: Any, super_users: str = "User:admin", allow_everyone: bool = False) -> Any:
    """Turn the authorizer on for `services` (over its metadata image's ACLs); returns it."""
    settings = AuthorizerSettings(parse_super_users(super_users), allow_everyone)
    services.authorization = RequestAuthorizer(StandardAuthorizer(settings), lambda: services.metadata.image.acls,
                                               (CLUSTER_LISTENER,), AuthorizerSensors(services.clock))
    return services


def grant(services: Any, resource_type: int, name: str, *operations: int, principal: str = "User:alice",
          deny: bool = False, pattern: int = PatternType.LITERAL, host: str = "*") -> None:
    """Write ALLOW (or DENY) bindings through the controller of `services`."""
    permission = AclPermissionType.DENY if deny else AclPermissionType.ALLOW
    creations = [AclCreation(int(resource_type), name, int(pattern), principal, host, int(AclOperation(op)),
                             int(permission)) for op in operations]
    errors = asyncio.run(services.metadata.create_acls(creations))
    assert all(int(e.code) == 0 for e in errors), errors


_ids = itertools.count(1)


def binding(resource_type: int, name: str, operation: int, principal: str = "User:alice", deny: bool = False,
            pattern: int = PatternType.LITERAL, host: str = "*") -> AclBinding:
    permission = AclPermissionType.DENY if deny else AclPermissionType.ALLOW
    return AclBinding(uuid.UUID(int=next(_ids)), int(resource_type), name, int(pattern), principal, host,
                      int(operation), int(permission))


def static_authorizer(*bindings: AclBinding, super_users: str = "User:admin") -> RequestAuthorizer:
    """An authorizer over fixed bindings, for services without a metadata image."""
    acls = {b.id: b for b in bindings}
    settings = AuthorizerSettings(parse_super_users(super_users))
    return RequestAuthorizer(StandardAuthorizer(settings), lambda: acls, (CLUSTER_LISTENER,))
