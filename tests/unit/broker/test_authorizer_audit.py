"""The authorizer's audit log (Kafka's `kafka.authorizer.logger`): the message's shape, and
which decisions are logged at which level (Kafka's Action.logIfAllowed / logIfDenied)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from kio.index import load_response_schema

from kmirror.broker.api import RequestContext
from kmirror.broker.authorization import RequestAuthorizer
from kmirror.broker.authorizer_audit import (
    AUDIT_LOGGER,
    TRACE,
    Action,
    build_audit_message,
    resource_type_name,
)
from kmirror.broker.authorizer_sensors import AuthorizerSensors
from kmirror.metadata.authorizer import (
    AuthorizationResult,
    AuthorizerSettings,
    DefaultRule,
    MatchingAclRule,
    StandardAuthorizer,
    SuperUserRule,
    parse_super_users,
)
from kmirror.metadata.controller.acls import AclOperation as Op
from kmirror.metadata.controller.acls import AclPermissionType as Perm
from kmirror.metadata.controller.acls import PatternType as Pat
from kmirror.metadata.controller.acls import ResourceType as Res
from kmirror.metadata.image import AclBinding
from kmirror.ports import ManualClock
from kmirror.protocol.codec import RequestHeaderView

ALLOWED, DENIED = AuthorizationResult.ALLOWED, AuthorizationResult.DENIED
READ_ORDERS = AclBinding(uuid.UUID(int=1), Res.TOPIC, "orders", Pat.LITERAL, "User:alice", "*", Op.READ, Perm.ALLOW)


def test_the_message_is_kafkas() -> None:
    message = build_audit_message("User:alice", "127.0.0.1", "Fetch", Action(Op.READ, Res.TOPIC, "foo"),
                                  DefaultRule(DENIED))
    assert message == ("Principal = User:alice is Denied operation = READ from host = 127.0.0.1 on resource = "
                       "Topic:LITERAL:foo for request = Fetch with resourceRefCount = 1 based on rule DefaultDeny")
    message = build_audit_message("User:alice", "10.0.0.7", "Produce", Action(Op.READ, Res.TOPIC, "orders", 3),
                                  MatchingAclRule(READ_ORDERS, ALLOWED))
    assert message == (
        "Principal = User:alice is Allowed operation = READ from host = 10.0.0.7 on resource = "
        "Topic:LITERAL:orders for request = Produce with resourceRefCount = 3 based on rule MatchingAcl(acl="
        "StandardAcl[resourceType=TOPIC, resourceName=orders, patternType=LITERAL, principal=User:alice, host=*, "
        "operation=READ, permissionType=ALLOW])")
    assert build_audit_message("User:admin", "::1", "CreateTopics", Action(Op.CREATE, Res.CLUSTER, "kafka-cluster"),
                               SuperUserRule()).endswith(
        "is Allowed operation = CREATE from host = ::1 on resource = Cluster:LITERAL:kafka-cluster for request = "
        "CreateTopics with resourceRefCount = 1 based on rule SuperUser")


@pytest.mark.parametrize(("resource_type", "name"), [
    (Res.TOPIC, "Topic"), (Res.GROUP, "Group"), (Res.CLUSTER, "Cluster"), (Res.TRANSACTIONAL_ID, "TransactionalId"),
    (Res.DELEGATION_TOKEN, "DelegationToken"), (Res.USER, "User"), (Res.CLUSTER_MIRROR, "ClusterMirror"),
])
def test_resource_type_names_are_kafkas_pascal_case(resource_type: Res, name: str) -> None:
    assert resource_type_name(resource_type) == name


def ctx(api_key: int, version: int, principal: str = "alice", listener: str = "CLIENT") -> RequestContext:
    return RequestContext(RequestHeaderView(api_key, version, 1, "t"), load_response_schema(api_key, version),
                          "127.0.0.1", 1, listener, principal)


FETCH, PRODUCE, METADATA = ctx(1, 12), ctx(0, 9), ctx(3, 12)


def authorizer(*bindings: AclBinding, clock: ManualClock | None = None) -> RequestAuthorizer:
    acls = {b.id: b for b in bindings}
    settings = AuthorizerSettings(parse_super_users("User:admin"))
    return RequestAuthorizer(StandardAuthorizer(settings), lambda: acls, ("INTERNAL",),
                             AuthorizerSensors(clock or ManualClock()))


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == AUDIT_LOGGER]


@pytest.fixture
def audit(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(TRACE, logger=AUDIT_LOGGER)
    return caplog


def test_the_request_name_is_the_apis_kafka_name() -> None:
    assert (FETCH.request_name, PRODUCE.request_name, METADATA.request_name) == ("Fetch", "Produce", "Metadata")


def test_a_denial_is_info_and_a_grant_debug(audit: pytest.LogCaptureFixture) -> None:
    a = authorizer(READ_ORDERS)
    assert not a.authorize(PRODUCE, Op.WRITE, Res.TOPIC, "orders")
    assert a.authorize(FETCH, Op.READ, Res.TOPIC, "orders")
    assert audit_lines(audit) == [
        ("INFO", "Principal = User:alice is Denied operation = WRITE from host = 127.0.0.1 on resource = "
                 "Topic:LITERAL:orders for request = Produce with resourceRefCount = 1 based on rule DefaultDeny"),
        ("DEBUG", "Principal = User:alice is Allowed operation = READ from host = 127.0.0.1 on resource = "
                  "Topic:LITERAL:orders for request = Fetch with resourceRefCount = 1 based on rule MatchingAcl(acl="
                  "StandardAcl[resourceType=TOPIC, resourceName=orders, patternType=LITERAL, principal=User:alice, "
                  "host=*, operation=READ, permissionType=ALLOW])"),
    ]


def test_at_the_nodes_info_level_only_refusals_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    a = authorizer(READ_ORDERS)
    a.authorize(FETCH, Op.READ, Res.TOPIC, "orders")
    a.filter(METADATA, Op.DESCRIBE, Res.TOPIC, ["orders", "payments"], log_if_denied=False)
    a.authorize(FETCH, Op.READ, Res.TOPIC, "payments")
    assert [level for level, _ in audit_lines(caplog)] == ["INFO"]
    assert "Denied operation = READ" in audit_lines(caplog)[0][1] and "Topic:LITERAL:payments" in audit_lines(caplog)[0][1]


def test_a_filter_that_leaves_out_is_not_a_refusal(audit: pytest.LogCaptureFixture) -> None:
    """Metadata for all topics (Kafka: logIfDenied = !isAllTopics): denials at TRACE."""
    a = authorizer(READ_ORDERS)
    assert a.filter(METADATA, Op.DESCRIBE, Res.TOPIC, ["orders", "payments"], log_if_denied=False) == {"orders"}
    assert [(level, "payments" in text) for level, text in audit_lines(audit)] == [("DEBUG", False), ("TRACE", True)]


def test_a_filter_counts_how_often_the_request_names_a_resource(audit: pytest.LogCaptureFixture) -> None:
    a = authorizer()
    assert a.filter(PRODUCE, Op.WRITE, Res.TOPIC, ["orders", "orders", "payments"]) == set()
    lines = dict((text.split("Topic:LITERAL:")[1].split(" ")[0], text) for _, text in audit_lines(audit))
    assert "resourceRefCount = 2" in lines["orders"] and "resourceRefCount = 1" in lines["payments"]


def test_authorized_operations_leave_no_audit_line_above_trace(audit: pytest.LogCaptureFixture) -> None:
    a = authorizer(READ_ORDERS)
    assert a.authorized_operations(METADATA, Res.TOPIC, "orders", [Op.READ, Op.WRITE]) == [Op.READ]
    assert [level for level, _ in audit_lines(audit)] == ["TRACE", "TRACE"]


def test_authorize_any_asks_about_a_hardcoded_name_first(audit: pytest.LogCaptureFixture) -> None:
    """Kafka's Authorizer.authorizeByResourceType: reference count 0, a denial not a refusal."""
    write_t = AclBinding(uuid.UUID(int=2), Res.TOPIC, "t", Pat.LITERAL, "User:alice", "*", Op.WRITE, Perm.ALLOW)
    assert authorizer(write_t).authorize_any(ctx(22, 4), Op.WRITE, Res.TOPIC)
    ((level, text),) = audit_lines(audit)
    assert level == "TRACE" and "Topic:LITERAL:hardcode for request = InitProducerId with resourceRefCount = 0" in text


def test_super_users_are_decided_by_the_super_user_rule(audit: pytest.LogCaptureFixture) -> None:
    a = authorizer()
    assert a.authorize(ctx(19, 7, "admin"), Op.CREATE, Res.CLUSTER, "kafka-cluster")
    ((level, text),) = audit_lines(audit)
    assert level == "DEBUG" and text.startswith("Principal = User:admin is Allowed") and text.endswith("rule SuperUser")


def test_the_clusters_own_listeners_are_not_asked(audit: pytest.LogCaptureFixture) -> None:
    a = authorizer()
    assert a.authorize(ctx(0, 9, "ANONYMOUS", "INTERNAL"), Op.WRITE, Res.TOPIC, "orders")
    assert audit_lines(audit) == []


def _rates(a: RequestAuthorizer) -> tuple[float, float, float]:
    sensors: Any = a.sensors
    return sensors.request_rate_per_minute(), sensors.allowed_rate_per_minute(), sensors.denied_rate_per_minute()


def test_every_decision_is_counted_logged_or_not() -> None:
    """Kafka counts every action: probes, filters and authorized operations too; requests on
    the cluster's own listeners are not decisions."""
    clock = ManualClock()
    a = authorizer(READ_ORDERS, clock=clock)
    a.authorize(FETCH, Op.READ, Res.TOPIC, "orders")  # allowed
    a.authorize(PRODUCE, Op.WRITE, Res.TOPIC, "orders")  # denied
    a.filter(METADATA, Op.DESCRIBE, Res.TOPIC, ["orders", "payments", "payments"], log_if_denied=False)  # 1 + 1
    a.authorized_operations(METADATA, Res.TOPIC, "orders", [Op.READ, Op.WRITE])  # 1 + 1
    a.authorize(ctx(0, 9, "admin"), Op.WRITE, Res.TOPIC, "orders")  # allowed: SuperUser
    a.authorize(ctx(0, 9, "ANONYMOUS", "INTERNAL"), Op.WRITE, Res.TOPIC, "orders")  # not asked
    # 7 decisions (4 allowed, 3 denied) in a fresh 2 x 30 s window: per minute, twice as many
    assert _rates(a) == (14.0, 8.0, 6.0)
