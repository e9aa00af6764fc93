"""AlterPartition (key 56, v2-3, controller plane): a partition leader's ISR change request.
Validation and the resulting PartitionChangeRecord live in `metadata.controller.alter_partition`."""

from __future__ import annotations

import datetime
from typing import Any

from kio.static.primitive import i32

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.alter_partition import AlterPartitionItem
from kmirror.protocol.entities import build, nested


@api(56, "AlterPartition", 2, 3, planes=("controller",))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    items = []
    for topic in request.topics:
        for p in topic.partitions:
            if hasattr(p, "new_isr_with_epochs"):
                isr = tuple(int(b.broker_id) for b in p.new_isr_with_epochs)
            else:
                isr = tuple(int(b) for b in p.new_isr)
            items.append(
                AlterPartitionItem(topic.topic_id, int(p.partition_index), int(p.leader_epoch), isr, int(p.partition_epoch))
            )
    top, results = await services.controller_metadata.alter_partition(int(request.broker_id), int(request.broker_epoch), items)
    rt = ctx.response_type
    part_cls = nested(rt, "PartitionData")
    topic_cls = nested(rt, "TopicData")
    by_topic: dict[Any, list[Any]] = {}
    for r in results:
        by_topic.setdefault(r.topic_id, []).append(
            build(
                part_cls,
                partition_index=i32(r.partition_index),
                error_code=r.error.code,
                leader_id=i32(r.leader_id),
                leader_epoch=i32(r.leader_epoch),
                isr=tuple(i32(b) for b in r.isr),
                leader_recovery_state=0,
                partition_epoch=i32(r.partition_epoch),
            )
        )
    topics = tuple(build(topic_cls, topic_id=tid, partitions=tuple(ps)) for tid, ps in by_topic.items())
    return build(rt, throttle_time=datetime.timedelta(0), error_code=top.code, topics=topics)
