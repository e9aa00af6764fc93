"""OffsetsForLeaderEpoch (key 23), v2-v4: end offset of a leader epoch (KIP-101, KIP-320).

Consumers (replica_id -1) validate their position after a leader change: the answer is the
largest epoch <= the requested one and the offset where it ends; -1/-1 when the log has no
such epoch. `current_leader_epoch` fences stale (FENCED_LEADER_EPOCH) and future
(UNKNOWN_LEADER_EPOCH) callers. Followers (replica_id >= 0) ask the leader the same way to
find where their log diverges before fetching (KIP-101 and KIP-279, epoch-based truncation).
Authorization (Kafka's): CLUSTER_ACTION on the cluster, or DESCRIBE on each topic (else
TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import CLUSTER_ACTION, DESCRIBE, TOPIC
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.outcomes import EpochEndOffset
from kmirror.types import TopicPartition


@api(23, "OffsetForLeaderEpoch", 2, 4)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    TopicResult = nested(rt, "OffsetForLeaderTopicResult")
    PartitionResult = nested(rt, "EpochEndOffset")
    rm = services.replica_manager
    topics = []
    authorization = services.authorization
    names = [t.topic for t in request.topics]
    describable = (set(names) if authorization.authorize_cluster(ctx, CLUSTER_ACTION, log_if_denied=False)
                   else authorization.filter(ctx, DESCRIBE, TOPIC, names))
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            index = int(p.partition)
            if topic.topic not in describable:
                partitions.append(build(PartitionResult, partition=index, leader_epoch=-1, end_offset=-1,
                                        error_code=ErrorCode.topic_authorization_failed))
                continue
            result = rm.offset_for_leader_epoch(
                TopicPartition(topic.topic, index), int(getattr(p, "current_leader_epoch", -1)), int(p.leader_epoch)
            )
            if isinstance(result, EpochEndOffset):
                fields: dict[str, Any] = {
                    "error_code": ErrorCode.none,
                    "leader_epoch": result.leader_epoch,
                    "end_offset": result.end_offset,
                }
            else:
                fields = {"error_code": result.code, "leader_epoch": -1, "end_offset": -1}
            partitions.append(build(PartitionResult, partition=index, **fields))
        topics.append(TopicResult(topic=topic.topic, partitions=tuple(partitions)))
    return build(rt, throttle_time=datetime.timedelta(0), topics=tuple(topics))
