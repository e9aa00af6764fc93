"""OffsetCommit (key 8, v2-v9; v10 names topics by id and is not served yet).

Commits for topics the cluster does not know are UNKNOWN_TOPIC_OR_PARTITION and never reach
the coordinator (Kafka `KafkaApis.handleOffsetCommitRequest`). A v2-v4 RetentionTimeMs other
than -1 gives the offsets their own expire timestamp, as Kafka 4 still does.

Authorization (Kafka's): READ on the group (else every partition is answered
GROUP_AUTHORIZATION_FAILED) and READ on each topic (else TOPIC_AUTHORIZATION_FAILED)."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import GROUP, READ, TOPIC
from kmirror.broker.services import BrokerServices
from kmirror.coordinator.offsets.commits import DEFAULT_RETENTION_TIME_MS, OffsetToCommit
from kmirror.coordinator.results import PartitionResult
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


@api(8, "OffsetCommit", 2, 9)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    image = getattr(services.metadata, "image", None)
    authorization = services.authorization
    if not authorization.authorize(ctx, READ, GROUP, request.group_id):
        return _answer(ctx, [PartitionResult(t.name, p.partition_index, ErrorCode.group_authorization_failed)
                             for t in request.topics for p in t.partitions])
    readable = authorization.filter(ctx, READ, TOPIC, (t.name for t in request.topics))
    exists = (lambda topic: topic in image.topics) if image is not None else (lambda topic: True)

    def known(topic: str) -> bool:
        return topic in readable and exists(topic)

    unknown = [
        PartitionResult(t.name, p.partition_index,
                        ErrorCode.unknown_topic_or_partition if t.name in readable else ErrorCode.topic_authorization_failed)
        for t in request.topics
        if not known(t.name)
        for p in t.partitions
    ]
    offsets = [
        OffsetToCommit(
            t.name, p.partition_index, p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata
        )
        for t in request.topics
        if known(t.name)
        for p in t.partitions
    ]
    result = await services.groups.commit_offsets(
        group_id=request.group_id,
        generation_id=request.generation_id_or_member_epoch,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        offsets=offsets,
        retention_time_ms=_retention_time_ms(request),
    )
    return _answer(ctx, [*result.partitions, *unknown])


def _answer(ctx: RequestContext, results: list[PartitionResult]) -> Any:
    rt = ctx.response_type
    Topic = nested(rt, "OffsetCommitResponseTopic")
    Partition = nested(rt, "OffsetCommitResponsePartition")
    by_topic: dict[str, list[Any]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append(Partition(partition_index=r.partition, error_code=r.error))
    return build(
        rt,
        throttle_time=datetime.timedelta(0),
        topics=tuple(Topic(name=name, partitions=tuple(parts)) for name, parts in by_topic.items()),
    )


def _retention_time_ms(request: Any) -> int:
    """RetentionTimeMs of v2-v4 (-1, the broker's retention, when absent)."""
    retention = getattr(request, "retention_time", None)
    if retention is None:
        return DEFAULT_RETENTION_TIME_MS
    return int(retention // datetime.timedelta(milliseconds=1))
