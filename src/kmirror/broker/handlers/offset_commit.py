"""OffsetCommit (key 8, v2-v10).

Commits for topics the cluster does not know are UNKNOWN_TOPIC_OR_PARTITION and never reach
the coordinator (Kafka `KafkaApis.handleOffsetCommitRequest`). A v2-v4 RetentionTimeMs other
than -1 gives the offsets their own expire timestamp, as Kafka 4 still does. From v10 topics
are named by id only, in the request and the response (Kafka 4.1, KAFKA-14690): an id the
cluster does not know is UNKNOWN_TOPIC_ID, before authorization, as Kafka answers it.

Authorization (Kafka's): READ on the group (else every partition is answered
GROUP_AUTHORIZATION_FAILED) and READ on each topic (else TOPIC_AUTHORIZATION_FAILED)."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import GROUP, READ, TOPIC
from kmirror.broker.services import BrokerServices
from kmirror.broker.topic_ids import TOPIC_IDS_VERSION, TopicIds
from kmirror.coordinator.offsets.commits import DEFAULT_RETENTION_TIME_MS, OffsetToCommit
from kmirror.coordinator.results import PartitionResult
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


@api(8, "OffsetCommit", 2, 10)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    image = getattr(services.metadata, "image", None)
    ids = TopicIds(image)
    # (name, partitions) of each requested topic; from v10 its name is resolved from its id
    by_id = ctx.api_version >= TOPIC_IDS_VERSION
    topics = [(ids.name_of(t.topic_id) if by_id else t.name, t.partitions) for t in request.topics]
    unknown_ids = [PartitionResult(ids.unknown(t.topic_id), p.partition_index, ErrorCode.unknown_topic_id)
                   for (name, _), t in zip(topics, request.topics, strict=True) if name is None for p in t.partitions]
    named = [(name, parts) for name, parts in topics if name is not None]
    authorization = services.authorization
    if not authorization.authorize(ctx, READ, GROUP, request.group_id):
        refused = [(name, p.partition_index) for name, parts in named for p in parts]
        refused += [(r.topic, r.partition) for r in unknown_ids]
        return _answer(ctx, [PartitionResult(t, p, ErrorCode.group_authorization_failed) for t, p in refused], ids)
    readable = authorization.filter(ctx, READ, TOPIC, (name for name, _ in named))
    exists = (lambda topic: topic in image.topics) if image is not None else (lambda topic: True)

    def known(topic: str) -> bool:
        return topic in readable and exists(topic)

    unknown = [
        PartitionResult(name, p.partition_index,
                        ErrorCode.unknown_topic_or_partition if name in readable else ErrorCode.topic_authorization_failed)
        for name, parts in named
        if not known(name)
        for p in parts
    ]
    offsets = [
        OffsetToCommit(
            name, p.partition_index, p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata
        )
        for name, parts in named
        if known(name)
        for p in parts
    ]
    result = await services.groups.commit_offsets(
        group_id=request.group_id,
        generation_id=request.generation_id_or_member_epoch,
        member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        offsets=offsets,
        retention_time_ms=_retention_time_ms(request),
    )
    return _answer(ctx, [*result.partitions, *unknown, *unknown_ids], ids)


def _answer(ctx: RequestContext, results: list[PartitionResult], ids: TopicIds) -> Any:
    rt = ctx.response_type
    Topic = nested(rt, "OffsetCommitResponseTopic")
    Partition = nested(rt, "OffsetCommitResponsePartition")
    by_topic: dict[str, list[Any]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append(Partition(partition_index=r.partition, error_code=r.error))
    return build(
        rt,
        throttle_time=datetime.timedelta(0),
        topics=tuple(Topic(**ids.naming(ctx.api_version, name), partitions=tuple(parts))
                     for name, parts in by_topic.items()),
    )


def _retention_time_ms(request: Any) -> int:
    """RetentionTimeMs of v2-v4 (-1, the broker's retention, when absent)."""
    retention = getattr(request, "retention_time", None)
    if retention is None:
        return DEFAULT_RETENTION_TIME_MS
    return int(retention // datetime.timedelta(milliseconds=1))
