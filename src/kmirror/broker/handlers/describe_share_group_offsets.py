"""DescribeShareGroupOffsets (key 90, v0-v1; KIP-932): a share group's start offset of each
partition (-1 where none is stored), from the states its coordinator stores; with no topics
named, every partition with a stored state. v1's lag is -1 (not computed: `kmirror
share-groups --describe` computes it from the log end offsets).

Authorization (Kafka's): DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED) and on
each topic (else that topic's partitions TOPIC_AUTHORIZATION_FAILED; left out when none are
named)."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import DESCRIBE, GROUP, TOPIC
from kmirror.broker.services import BrokerServices
from kmirror.coordinator.share_group.offsets import PartitionOffset, ShareOffsetsResult
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


@api(90, "DescribeShareGroupOffsets", 0, 1)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    Group = nested(rt, "DescribeShareGroupOffsetsResponseGroup")
    Topic = nested(rt, "DescribeShareGroupOffsetsResponseTopic")
    Partition = nested(rt, "DescribeShareGroupOffsetsResponsePartition")
    authorization = services.authorization
    describable = authorization.filter(ctx, DESCRIBE, GROUP, [g.group_id for g in request.groups])
    groups = []
    for g in request.groups:
        if g.group_id not in describable:
            result = ShareOffsetsResult(ErrorCode.group_authorization_failed, "Group authorization failed.")
        else:
            named = None if g.topics is None else [(t.topic_name, [int(p) for p in t.partitions]) for t in g.topics]
            result = services.groups.describe_share_group_offsets(g.group_id, named)
        readable = authorization.filter(ctx, DESCRIBE, TOPIC, {p.topic for p in result.partitions})
        by_topic: dict[str, list[PartitionOffset]] = {}
        for p in result.partitions:
            if p.topic in readable:
                by_topic.setdefault(p.topic, []).append(p)
            elif g.topics is not None:
                by_topic.setdefault(p.topic, []).append(PartitionOffset(
                    p.topic, p.topic_id, p.partition, error=ErrorCode.topic_authorization_failed))
        groups.append(build(Group, group_id=g.group_id, error_code=result.error, error_message=result.error_message,
                            topics=tuple(build(Topic, topic_name=name, topic_id=ps[0].topic_id, partitions=tuple(
                                build(Partition, partition_index=p.partition, start_offset=p.start_offset,
                                      leader_epoch=p.leader_epoch, lag=-1, error_code=p.error, error_message=None)
                                for p in ps)) for name, ps in by_topic.items())))
    return build(rt, throttle_time=datetime.timedelta(0), groups=tuple(groups))
