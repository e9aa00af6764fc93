"""Authorization of config resources (Kafka's ConfigAdminManager / AuthHelper): which ACL
resource a ConfigResource is checked on, and the error a refused one is answered with.

TOPIC -> the topic (TOPIC_AUTHORIZATION_FAILED); BROKER, BROKER_LOGGER and CLIENT_METRICS ->
the cluster (CLUSTER_AUTHORIZATION_FAILED); GROUP -> the group (GROUP_AUTHORIZATION_FAILED);
MIRROR (KIP-1279) -> the ClusterMirror, refused with CLUSTER_AUTHORIZATION_FAILED, the code the
KIP's error table gives "The client is not authorized to perform the mirror operation": these
responses' error codes are Kafka's ErrorCode, which MIRROR_AUTHORIZATION_FAILED (134) is not
part of, so a client decoding them with Kafka's codes (kio, kmirror's own client) could not
read 134. Another type is left to the handler, which refuses it as invalid.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from kio.static.primitive import i8

from kmirror.broker.api import RequestContext
from kmirror.broker.authorization import CLUSTER, CLUSTER_MIRROR, GROUP, TOPIC
from kmirror.broker.refusals import with_results
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.acls import CLUSTER_NAME
from kmirror.metadata.image import ConfigResourceType
from kmirror.metadata.mirror_records import MIRROR_CONFIG_RESOURCE_TYPE
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode

_ACL_RESOURCES: dict[int, tuple[int, bool, Any]] = {  # config type -> (ACL type, named?, error)
    ConfigResourceType.TOPIC: (TOPIC, True, ErrorCode.topic_authorization_failed),
    ConfigResourceType.BROKER: (CLUSTER, False, ErrorCode.cluster_authorization_failed),
    ConfigResourceType.BROKER_LOGGER: (CLUSTER, False, ErrorCode.cluster_authorization_failed),
    ConfigResourceType.CLIENT_METRICS: (CLUSTER, False, ErrorCode.cluster_authorization_failed),
    ConfigResourceType.GROUP: (GROUP, True, ErrorCode.group_authorization_failed),
    MIRROR_CONFIG_RESOURCE_TYPE: (CLUSTER_MIRROR, True, ErrorCode.cluster_authorization_failed),
}


def config_refusal(services: BrokerServices, ctx: RequestContext, operation: int, resource_type: int,
                   resource_name: str) -> Any | None:
    """The error a config resource the request may not `operation` is answered with, else None."""
    found = _ACL_RESOURCES.get(int(resource_type))
    if found is None:
        return None
    acl_type, named, error = found
    if services.authorization.authorize(ctx, operation, acl_type, resource_name if named else CLUSTER_NAME):
        return None
    return error


Alter = Callable[[BrokerServices, RequestContext, Any], Awaitable[Any]]


async def authorized_config_change(services: BrokerServices, ctx: RequestContext, request: Any, operation: int,
                                   alter: Alter) -> Any:
    """AlterConfigs / IncrementalAlterConfigs: `alter` the resources the request may
    `operation`, the others answered with their error."""
    kept, refused = [], []
    cls = nested(ctx.response_type, "AlterConfigsResourceResponse")
    for r in request.resources:
        error = config_refusal(services, ctx, operation, int(r.resource_type), r.resource_name)
        if error is None:
            kept.append(r)
        else:
            refused.append(build(cls, error_code=error, error_message="Authorization failed.",
                                 resource_type=i8(int(r.resource_type)), resource_name=r.resource_name))
    if refused:
        request = dataclasses.replace(request, resources=tuple(kept))
    return with_results(await alter(services, ctx, request), "responses", refused)
