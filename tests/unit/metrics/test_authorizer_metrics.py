"""The authorizer's metrics under Kafka's names (StandardAuthorizer's plugin metrics), read at
scrape time: decision rates per minute and the ACL count, in JMX and Prometheus form."""

from __future__ import annotations

import uuid

from kio.index import load_response_schema

from kmirror.broker.api import RequestContext
from kmirror.broker.authorization import RequestAuthorizer
from kmirror.broker.authorizer_sensors import AuthorizerSensors
from kmirror.metadata.authorizer import AuthorizerSettings, StandardAuthorizer
from kmirror.metadata.controller.acls import AclOperation as Op
from kmirror.metadata.controller.acls import AclPermissionType as Perm
from kmirror.metadata.controller.acls import PatternType as Pat
from kmirror.metadata.controller.acls import ResourceType as Res
from kmirror.metadata.image import AclBinding
from kmirror.metrics.authorizer_metrics import register_authorizer_metrics
from kmirror.metrics.prometheus import render
from kmirror.metrics.registry import MetricsRegistry
from kmirror.ports import ManualClock
from kmirror.protocol.codec import RequestHeaderView

BEAN = "kafka.server:type=plugins,name={},config=authorizer.class.name,class=StandardAuthorizer,role=broker"
LABELS = '{config="authorizer.class.name",class="StandardAuthorizer",role="broker"}'


def test_decisions_and_acls_under_kafkas_names() -> None:
    clock = ManualClock()
    registry = MetricsRegistry(clock)
    image: dict[str, dict[uuid.UUID, AclBinding]] = {"acls": {}}  # a new mapping per change, as an image's
    authorization = RequestAuthorizer(StandardAuthorizer(AuthorizerSettings()), lambda: image["acls"], (),
                                      AuthorizerSensors(clock))
    register_authorizer_metrics(registry, authorization)
    fetch = RequestContext(RequestHeaderView(1, 12, 1, "t"), load_response_schema(1, 12), "127.0.0.1", 1, "CLIENT",
                           "alice")
    assert not authorization.authorize(fetch, Op.READ, Res.TOPIC, "orders")
    read = AclBinding(uuid.uuid4(), Res.TOPIC, "orders", Pat.LITERAL, "User:alice", "*", Op.READ, Perm.ALLOW)
    image["acls"] = {read.id: read}
    assert authorization.authorize(fetch, Op.READ, Res.TOPIC, "orders")
    assert authorization.authorize(fetch, Op.READ, Res.TOPIC, "orders")

    values = registry.values()
    assert values[BEAN.format("authorization-request-rate-per-minute")] == 6.0
    assert values[BEAN.format("authorization-allowed-rate-per-minute")] == 4.0
    assert values[BEAN.format("authorization-denied-rate-per-minute")] == 2.0
    assert values[BEAN.format("acls-total-count")] == 1.0
    text = render(registry)
    assert f"kafka_server_plugins_authorization_request_rate_per_minute{LABELS} 6" in text
    assert f"kafka_server_plugins_authorization_allowed_rate_per_minute{LABELS} 4" in text
    assert f"kafka_server_plugins_authorization_denied_rate_per_minute{LABELS} 2" in text
    assert f"kafka_server_plugins_acls_total_count{LABELS} 1" in text
    image["acls"] = {}
    assert f"kafka_server_plugins_acls_total_count{LABELS} 0" in render(registry)


def test_no_authorizer_no_metrics() -> None:
    registry = MetricsRegistry(ManualClock())
    register_authorizer_metrics(registry, RequestAuthorizer())
    assert "plugins" not in render(registry)
