"""AlterPartitionReassignments (key 45, v0-1; KIP-455, KIP-860's
`allow_replication_factor_change`). The active controller answers; a broker without the
controller role forwards the request, as Kafka does."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.reassignment import ReassignmentTarget
from kmirror.protocol.entities import build, nested


@api(45, "AlterPartitionReassignments", 0, 1, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    metadata = services.metadata
    if metadata.forwarding:
        return await metadata.forward(request)
    topics = {
        t.name: [
            ReassignmentTarget(int(p.partition_index), None if p.replicas is None else tuple(int(b) for b in p.replicas))
            for p in t.partitions
        ]
        for t in request.topics
    }
    allow_rf_change = bool(getattr(request, "allow_replication_factor_change", True))
    results = await metadata.alter_partition_reassignments(topics, allow_rf_change)
    rt = ctx.response_type
    part_cls = nested(rt, "ReassignablePartitionResponse")
    topic_cls = nested(rt, "ReassignableTopicResponse")
    by_topic: dict[str, list[Any]] = {t.name: [] for t in request.topics}
    for r in results:
        by_topic[r.topic].append(
            build(part_cls, partition_index=i32(r.partition), error_code=r.error.code, error_message=r.error.message)
        )
    extra: dict[str, Any] = {}
    if ctx.api_version >= 1:
        extra["allow_replication_factor_change"] = allow_rf_change
    return build(
        rt,
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        responses=tuple(build(topic_cls, name=name, partitions=tuple(ps)) for name, ps in by_topic.items()),
        **extra,
    )
