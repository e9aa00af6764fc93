"""DescribeCluster (key 60, v0-2): cluster id, controller id and the brokers (endpoint type 1).

Endpoint type 2 (controllers, KIP-919) is answered only on a controller listener, with the
quorum voters; a broker listener answers UNSUPPORTED_ENDPOINT_TYPE, as Kafka does.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import CLUSTER
from kmirror.broker.handlers.metadata import (
    AUTHORIZED_OPERATIONS_OMITTED,
    CLUSTER_OPERATIONS,
    operations_bitfield,
)
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.acls import CLUSTER_NAME
from kmirror.protocol.entities import build, nested

BROKER_ENDPOINTS = 1
CONTROLLER_ENDPOINTS = 2


@api(60, "DescribeCluster", 0, 2)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    image = services.metadata.image
    endpoint_type = int(getattr(request, "endpoint_type", BROKER_ENDPOINTS))
    include_fenced = bool(getattr(request, "include_fenced_brokers", False))
    broker_cls = nested(rt, "DescribeClusterBroker")
    error = ErrorCode.none
    message = None
    brokers: list[Any] = []
    controller_listener = ctx.listener in services.config.controller_listener_names
    if endpoint_type == BROKER_ENDPOINTS and not controller_listener:
        for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
            if b.fenced and not include_fenced:
                continue
            ep = b.endpoint(ctx.listener)
            if ep is None:
                continue
            brokers.append(
                build(broker_cls, broker_id=i32(b.broker_id), host=ep.host, port=i32(ep.port), rack=b.rack,
                      is_fenced=b.fenced)
            )
    elif endpoint_type == CONTROLLER_ENDPOINTS and controller_listener:
        for v in services.config.controller_quorum_voters:
            brokers.append(build(broker_cls, broker_id=i32(v.node_id), host=v.host, port=i32(v.port), rack=None,
                                 is_fenced=False))
    else:
        error = ErrorCode.unsupported_endpoint_type
        message = f"Endpoint type {endpoint_type} is not supported on listener {ctx.listener}."
    include_ops = bool(getattr(request, "include_cluster_authorized_operations", False))
    return build(
        rt,
        throttle_time=datetime.timedelta(0),
        error_code=error,
        error_message=message,
        endpoint_type=i8(endpoint_type),
        cluster_id=image.cluster_id or "",
        controller_id=i32(services.metadata.controller_id),
        brokers=tuple(brokers),
        cluster_authorized_operations=i32(
            operations_bitfield(services.authorization.authorized_operations(
                ctx, CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)) if include_ops else AUTHORIZED_OPERATIONS_OMITTED
        ),
    )
