"""ListPartitionReassignments (key 46, v0): the ongoing reassignments of the given partitions,
or of every partition when `topics` is null. Unknown topics and partitions, and partitions not
being reassigned, are left out, as Kafka does. Forwarded to the active controller."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested


@api(46, "ListPartitionReassignments", 0, 0, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    metadata = services.metadata
    if metadata.forwarding:
        return await metadata.forward(request)
    topics = None
    if request.topics is not None:
        topics = {t.name: [int(p) for p in t.partition_indexes] for t in request.topics}
    ongoing = metadata.list_partition_reassignments(topics)
    rt = ctx.response_type
    part_cls = nested(rt, "OngoingPartitionReassignment")
    topic_cls = nested(rt, "OngoingTopicReassignment")
    by_topic: dict[str, list[Any]] = {}
    for o in ongoing:
        by_topic.setdefault(o.topic, []).append(
            build(
                part_cls,
                partition_index=i32(o.partition),
                replicas=tuple(i32(b) for b in o.replicas),
                adding_replicas=tuple(i32(b) for b in o.adding_replicas),
                removing_replicas=tuple(i32(b) for b in o.removing_replicas),
            )
        )
    return build(
        rt,
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        error_message=None,
        topics=tuple(build(topic_cls, name=name, partitions=tuple(ps)) for name, ps in by_topic.items()),
    )
