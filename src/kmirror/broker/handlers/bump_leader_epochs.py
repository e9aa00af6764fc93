"""BumpLeaderEpochs (key 105, controller): STOPPING's epoch bump above every mirrored epoch
(`metadata.controller.mirrors.bump_leader_epochs`). Broker-only nodes forward it."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.mirrors import EpochBump
from kmirror.metadata.mirrors import UNSUPPORTED_VERSION_CODE, mirroring_enabled
from kmirror.protocol.entities import build, nested
from kmirror.protocol.mirror.registry import schemas


@api(105, "BumpLeaderEpochs", 0, 0, schemas=schemas(105), planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    if not mirroring_enabled(services.metadata.image):
        return build(rt, throttle_time=datetime.timedelta(0), error_code=UNSUPPORTED_VERSION_CODE, topics=())
    if services.metadata.forwarding:
        return await services.metadata.forward(request)
    bumps = [EpochBump(t.topic_id, int(p.partition_index), int(p.min_leader_epoch))
             for t in request.topics for p in t.partitions]
    results = await services.metadata.bump_leader_epochs(bumps, int(request.min_producer_id))
    topic_cls, part_cls = nested(rt, "TopicPartitions"), nested(rt, "PartitionDetail")
    by_topic: dict[str, list[Any]] = {}
    for r in results:
        by_topic.setdefault(r.topic_name or str(r.topic_id), []).append(
            build(part_cls, partition_index=r.partition, error_code=int(r.error.code)))
    return build(rt, throttle_time=datetime.timedelta(0), error_code=0,
                 topics=tuple(build(topic_cls, topic_name=n, partitions=tuple(ps)) for n, ps in by_topic.items()))
