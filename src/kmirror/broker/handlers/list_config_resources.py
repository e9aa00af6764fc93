"""ListConfigResources (key 74, v0-1; KIP-1142, ListClientMetricsResources before it): the
config resources a `kafka-configs.sh --describe` without a name walks, as Kafka's
KafkaApis.handleListConfigResources lists them.

- GROUP: the groups with a dynamic config;
- CLIENT_METRICS: none (kmirror has no client metrics subscriptions, KIP-714);
- BROKER_LOGGER and BROKER: the registered brokers with an endpoint on the request's listener;
- TOPIC: every topic.

v0 lists CLIENT_METRICS only. At v1 an empty `resource_types` is every type above; a type
outside them answers UNSUPPORTED_VERSION and nothing. DESCRIBE_CONFIGS on the cluster is
needed (`api_authorization`), else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.static.primitive import i8

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.metadata.image import ConfigResourceType, MetadataImage
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode

SUPPORTED_V1 = (
    ConfigResourceType.GROUP,
    ConfigResourceType.CLIENT_METRICS,
    ConfigResourceType.BROKER_LOGGER,
    ConfigResourceType.BROKER,
    ConfigResourceType.TOPIC,
)
"""Kafka's order of the listing, and the types v1 supports."""


def resources(image: MetadataImage, types: set[int], listener: str) -> list[tuple[int, str]]:
    """(type, name) of every resource of `types`, in Kafka's order of types, names sorted."""
    brokers = [str(b.broker_id) for _, b in sorted(image.brokers.items())
               if any(ep.name == listener for ep in b.endpoints)]
    names: dict[int, list[str]] = {
        ConfigResourceType.GROUP: sorted(r.name for r, configs in image.configs.items()
                                         if r.type == ConfigResourceType.GROUP and configs),
        ConfigResourceType.CLIENT_METRICS: [],
        ConfigResourceType.BROKER_LOGGER: brokers,
        ConfigResourceType.BROKER: brokers,
        ConfigResourceType.TOPIC: sorted(image.topics),
    }
    return [(int(t), name) for t in SUPPORTED_V1 if t in types for name in names[t]]


@api(74, "ListConfigResources", 0, 1)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    supported = set(SUPPORTED_V1) if ctx.api_version >= 1 else {ConfigResourceType.CLIENT_METRICS}
    asked = {int(t) for t in getattr(request, "resource_types", ())} or {int(t) for t in supported}
    if not asked <= supported:
        return build(rt, throttle_time=datetime.timedelta(0), error_code=ErrorCode.unsupported_version,
                     config_resources=())
    found = resources(services.metadata.image, asked, ctx.listener)
    resource_cls = nested(rt, "ConfigResource")
    entries = tuple(build(resource_cls, resource_name=name, resource_type=i8(t)) for t, name in found)
    return build(rt, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, config_resources=entries)
