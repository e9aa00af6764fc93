"""The authorizer's metrics, as Kafka's StandardAuthorizer registers them (KIP-877 plugin
metrics, KAFKA-18888): group `plugins`, tags `config=authorizer.class.name`,
`class=StandardAuthorizer`, `role=broker`, i.e.
`kafka.server:type=plugins,config=authorizer.class.name,class=StandardAuthorizer,role=broker`:
- `authorization-request-rate-per-minute`, `authorization-allowed-rate-per-minute`,
  `authorization-denied-rate-per-minute`: decisions per minute
  (`kmirror.broker.authorizer_sensors`);
- `acls-total-count`: the ACL bindings the authorizer decides over.
Registered only on a node with `authorizer.class.name`, as Kafka's exist only with the
authorizer. The role is `broker`: kmirror's controller listeners are never checked.
"""

from __future__ import annotations

from kmirror.broker.authorization import RequestAuthorizer
from kmirror.metrics.registry import MetricName, MetricsRegistry, metric_name

DOMAIN, GROUP = "kafka.server", "plugins"
TAGS = {"config": "authorizer.class.name", "class": "StandardAuthorizer", "role": "broker"}


def authorizer_metric(name: str) -> MetricName:
    return metric_name(DOMAIN, GROUP, name, **TAGS)


def register_authorizer_metrics(registry: MetricsRegistry, authorization: RequestAuthorizer) -> None:
    sensors = authorization.sensors
    if sensors is None:
        return
    registry.gauge(authorizer_metric("authorization-request-rate-per-minute"), sensors.request_rate_per_minute)
    registry.gauge(authorizer_metric("authorization-allowed-rate-per-minute"), sensors.allowed_rate_per_minute)
    registry.gauge(authorizer_metric("authorization-denied-rate-per-minute"), sensors.denied_rate_per_minute)
    registry.gauge(authorizer_metric("acls-total-count"), authorization.acl_count)
