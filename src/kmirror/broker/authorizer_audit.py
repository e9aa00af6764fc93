"""The authorizer's audit log: Kafka's `kafka.authorizer.logger` (StandardAuthorizerData's
`logAuditMessage`), one line per decision of the authorizer:

    Principal = User:alice is Denied operation = READ from host = 127.0.0.1 on resource =
    Topic:LITERAL:orders for request = Fetch with resourceRefCount = 1 based on rule DefaultDeny

(one line; the rule is the core's `MatchingRule`). Levels follow the `Action` asked, as Kafka's:
- a DENIED decision is logged at INFO when the request asked for the resource
  (`log_if_denied`); when it only probes or filters (Metadata listing every topic, ListGroups,
  the cluster-wide CREATE before the per-topic one, `authorized_operations`...) at TRACE;
- an ALLOWED decision is logged at DEBUG when it grants access (`log_if_allowed`); when it
  only computes `authorized_operations`, at TRACE.
The node logs at INFO: denials appear in its log, grants do not (Kafka's default log4j
configuration of the logger is INFO too). Requests the authorizer is not asked about (no
authorizer, the cluster's own listeners) leave no line.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kmirror.metadata.authorizer import AuthorizationResult, MatchingRule
from kmirror.metadata.controller.acls import AclOperation, ResourceType

AUDIT_LOGGER = "kafka.authorizer.logger"
TRACE = 5  # below DEBUG: log4j's TRACE
logging.addLevelName(TRACE, "TRACE")
audit_log = logging.getLogger(AUDIT_LOGGER)


@dataclass(frozen=True, slots=True)
class Action:
    """What a request asks the authorizer (Kafka's `Action`): an operation on a LITERAL resource
    the request names `resource_reference_count` times, and whether the decision is worth an
    audit line (see the module docstring)."""

    operation: int
    resource_type: int
    resource_name: str
    resource_reference_count: int = 1
    log_if_allowed: bool = True
    log_if_denied: bool = True


def resource_type_name(resource_type: int) -> str:
    """Kafka's `SecurityUtils.resourceTypeName`: TRANSACTIONAL_ID -> TransactionalId."""
    try:
        name = ResourceType(resource_type).name
    except ValueError:
        return str(resource_type)
    return "".join(part.capitalize() for part in name.split("_"))


def _operation_name(operation: int) -> str:
    try:
        return AclOperation(operation).name
    except ValueError:
        return str(operation)


def build_audit_message(principal: str, host: str, request_name: str, action: Action, rule: MatchingRule) -> str:
    verdict = "Allowed" if rule.result is AuthorizationResult.ALLOWED else "Denied"
    return (f"Principal = {principal} is {verdict} operation = {_operation_name(action.operation)} "
            f"from host = {host} on resource = {resource_type_name(action.resource_type)}:LITERAL:"
            f"{action.resource_name} for request = {request_name} with resourceRefCount = "
            f"{action.resource_reference_count} based on rule {rule}")


def audit_level(action: Action, rule: MatchingRule) -> int:
    if rule.result is AuthorizationResult.ALLOWED:
        return logging.DEBUG if action.log_if_allowed else TRACE
    return logging.INFO if action.log_if_denied else TRACE


def log_audit_message(principal: str, host: str, request_name: str, action: Action, rule: MatchingRule) -> None:
    level = audit_level(action, rule)
    if audit_log.isEnabledFor(level):
        audit_log.log(level, "%s", build_audit_message(principal, host, request_name, action, rule))
