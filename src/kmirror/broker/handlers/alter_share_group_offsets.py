"""AlterShareGroupOffsets (key 91, v0; KIP-932): set a share group's start offsets, only while
it has no member (NON_EMPTY_GROUP); a group that does not exist is created (KIP-1279's share
group offset sync relies on it). Answered once stored.

Authorization (Kafka's): READ on the group (before the handler) and READ on each topic (else
that topic's partitions TOPIC_AUTHORIZATION_FAILED)."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import READ, TOPIC
from kmirror.broker.services import BrokerServices
from kmirror.coordinator.share_group.offsets import PartitionOffset
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


@api(91, "AlterShareGroupOffsets", 0, 0)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    readable = services.authorization.filter(ctx, READ, TOPIC, [t.topic_name for t in request.topics])
    offsets = [(t.topic_name, int(p.partition_index), int(p.start_offset))
               for t in request.topics if t.topic_name in readable for p in t.partitions]
    result = await services.groups.alter_share_group_offsets(request.group_id, offsets)
    refused = [PartitionOffset(t.topic_name, None, int(p.partition_index), error=ErrorCode.topic_authorization_failed)
               for t in request.topics if t.topic_name not in readable for p in t.partitions]
    Topic = nested(rt, "AlterShareGroupOffsetsResponseTopic")
    Partition = nested(rt, "AlterShareGroupOffsetsResponsePartition")
    by_topic: dict[str, list[PartitionOffset]] = {}
    for p in (*result.partitions, *refused):
        by_topic.setdefault(p.topic, []).append(p)
    return build(rt, throttle_time=datetime.timedelta(0), error_code=result.error, error_message=result.error_message,
                 responses=tuple(build(Topic, topic_name=name, topic_id=ps[0].topic_id, partitions=tuple(
                     build(Partition, partition_index=p.partition, error_code=p.error, error_message=None)
                     for p in ps)) for name, ps in by_topic.items()))
