"""DeleteShareGroupOffsets (key 92, v0; KIP-932): forget a share group's start offsets of some
topics, only while it has no member (NON_EMPTY_GROUP).

Authorization (Kafka's): DELETE on the group (before the handler) and READ on each topic
(else TOPIC_AUTHORIZATION_FAILED)."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import READ, TOPIC
from kmirror.broker.services import BrokerServices
from kmirror.coordinator.share_group.offsets import PartitionOffset
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


@api(92, "DeleteShareGroupOffsets", 0, 0)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    names = [t.topic_name for t in request.topics]
    readable = services.authorization.filter(ctx, READ, TOPIC, names)
    result = await services.groups.delete_share_group_offsets(request.group_id, [n for n in names if n in readable])
    refused = [PartitionOffset(n, None, -1, error=ErrorCode.topic_authorization_failed)
               for n in names if n not in readable]
    Topic = nested(rt, "DeleteShareGroupOffsetsResponseTopic")
    return build(rt, throttle_time=datetime.timedelta(0), error_code=result.error, error_message=result.error_message,
                 responses=tuple(build(Topic, topic_name=p.topic, topic_id=p.topic_id, error_code=p.error,
                                       error_message=None) for p in (*result.partitions, *refused)))
