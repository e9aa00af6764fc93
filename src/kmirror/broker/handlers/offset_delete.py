"""OffsetDelete (key 47, KIP-496): drop committed offsets of topics the group does not consume.
Authorization (Kafka's): DELETE on the group (checked before the handler,
`api_authorization`) and READ on each topic (else TOPIC_AUTHORIZATION_FAILED)."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import READ, TOPIC
from kmirror.broker.services import BrokerServices
from kmirror.coordinator.results import PartitionResult
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


@api(47, "OffsetDelete", 0, 0)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    readable = services.authorization.filter(ctx, READ, TOPIC, (t.name for t in request.topics))
    partitions = [(t.name, int(p.partition_index)) for t in request.topics if t.name in readable for p in t.partitions]
    refused = [PartitionResult(t.name, int(p.partition_index), ErrorCode.topic_authorization_failed)
               for t in request.topics if t.name not in readable for p in t.partitions]
    result = await services.groups.delete_offsets(group_id=request.group_id, partitions=partitions)
    rt = ctx.response_type
    Topic = nested(rt, "OffsetDeleteResponseTopic")
    Partition = nested(rt, "OffsetDeleteResponsePartition")
    by_topic: dict[str, list[Any]] = {}
    for r in (*result.partitions, *refused):
        by_topic.setdefault(r.topic, []).append(Partition(partition_index=r.partition, error_code=r.error))
    return build(
        rt,
        error_code=result.error,
        throttle_time=datetime.timedelta(0),
        topics=tuple(Topic(name=name, partitions=tuple(parts)) for name, parts in by_topic.items()),
    )
