"""OffsetCommit (key 8, v2-v9; v10 names topics by id and is not served yet)."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.coordinator.offsets.commits import OffsetToCommit
from kmirror.protocol.entities import build, nested


@api(8, "OffsetCommit", 2, 9)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    offsets = [
        OffsetToCommit(
            t.name, p.partition_index, p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata
        )
        for t in request.topics
        for p in t.partitions
    ]
    result = await services.group_coordinator.commit_offsets(
        group_id=request.group_id,
        generation_id=request.generation_id_or_member_epoch,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        offsets=offsets,
    )
    rt = ctx.response_type
    Topic = nested(rt, "OffsetCommitResponseTopic")
    Partition = nested(rt, "OffsetCommitResponsePartition")
    by_topic: dict[str, list[Any]] = {}
    for r in result.partitions:
        by_topic.setdefault(r.topic, []).append(Partition(partition_index=r.partition, error_code=r.error))
    return build(
        rt,
        throttle_time=datetime.timedelta(0),
        topics=tuple(Topic(name=name, partitions=tuple(parts)) for name, parts in by_topic.items()),
    )
