"""DeleteRecords (key 21), v0-v2: move partitions' log start offsets (KIP-107).

Offset -1 means the high watermark; past the HW is OFFSET_OUT_OF_RANGE. The answer is the
new low watermark (log start offset). With one replica the low watermark is reached as
soon as the leader moves it; waiting for followers (Kafka's DelayedDeleteRecords) comes
with replication.
"""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import DELETE, TOPIC
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.outcomes import PartitionError
from kmirror.types import TopicPartition


@api(21, "DeleteRecords", 0, 2)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    TopicResult = nested(rt, "DeleteRecordsTopicResult")
    PartitionResult = nested(rt, "DeleteRecordsPartitionResult")
    # Kafka: DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED
    deletable = services.authorization.filter(ctx, DELETE, TOPIC, (t.name for t in request.topics))
    offsets = {
        TopicPartition(topic.name, int(p.partition_index)): int(p.offset) for topic in request.topics
        if topic.name in deletable for p in topic.partitions
    }
    results: dict[TopicPartition, Any] = dict(services.replica_manager.delete_records(offsets))
    results.update({TopicPartition(t.name, int(p.partition_index)): PartitionError(ErrorCode.topic_authorization_failed)
                    for t in request.topics if t.name not in deletable for p in t.partitions})
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            result = results[TopicPartition(topic.name, int(p.partition_index))]
            if isinstance(result, PartitionError):
                partitions.append(PartitionResult(partition_index=p.partition_index, low_watermark=-1, error_code=result.code))
            else:
                partitions.append(PartitionResult(partition_index=p.partition_index, low_watermark=result, error_code=ErrorCode.none))
        topics.append(TopicResult(name=topic.name, partitions=tuple(partitions)))
    return build(rt, throttle_time=datetime.timedelta(0), topics=tuple(topics))
