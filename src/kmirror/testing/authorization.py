"""Handler tests with the authorizer on: services whose requests on PLAINTEXT are checked
(the cluster listener is INTERNAL) and ACLs written through the controller."""

from __future__ import annotations

import asyncio
from typing import Any

from kmirror.broker.authorization import RequestAuthorizer
from kmirror.metadata.authorizer import AuthorizerSettings, StandardAuthorizer, parse_super_users
from kmirror.metadata.controller.acls import AclCreation, AclOperation, AclPermissionType, PatternType

CLUSTER_LISTENER = "INTERNAL"


def enable_authorizer(services: Any, super_users: str = "User:admin", allow_everyone: bool = False) -> Any:
    """Turn the authorizer on for `services` (over its metadata image's ACLs); returns it."""
    settings = AuthorizerSettings(parse_super_users(super_users), allow_everyone)
    services.authorization = RequestAuthorizer(StandardAuthorizer(settings), lambda: services.metadata.image.acls,
                                               (CLUSTER_LISTENER,))
    return services


def grant(services: Any, resource_type: int, name: str, *operations: int, principal: str = "User:alice",
          deny: bool = False, pattern: int = PatternType.LITERAL, host: str = "*") -> None:
    """Write ALLOW (or DENY) bindings through the controller of `services`."""
    permission = AclPermissionType.DENY if deny else AclPermissionType.ALLOW
    creations = [AclCreation(int(resource_type), name, int(pattern), principal, host, int(AclOperation(op)),
                             int(permission)) for op in operations]
    errors = asyncio.run(services.metadata.create_acls(creations))
    assert all(int(e.code) == 0 for e in errors), errors
