"""OffsetDelete (key 47, KIP-496): drop committed offsets of topics the group does not consume."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested


@api(47, "OffsetDelete", 0, 0)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    partitions = [(t.name, int(p.partition_index)) for t in request.topics for p in t.partitions]
    result = await services.groups.delete_offsets(group_id=request.group_id, partitions=partitions)
    rt = ctx.response_type
    Topic = nested(rt, "OffsetDeleteResponseTopic")
    Partition = nested(rt, "OffsetDeleteResponsePartition")
    by_topic: dict[str, list[Any]] = {}
    for r in result.partitions:
        by_topic.setdefault(r.topic, []).append(Partition(partition_index=r.partition, error_code=r.error))
    return build(
        rt,
        error_code=result.error,
        throttle_time=datetime.timedelta(0),
        topics=tuple(Topic(name=name, partitions=tuple(parts)) for name, parts in by_topic.items()),
    )
