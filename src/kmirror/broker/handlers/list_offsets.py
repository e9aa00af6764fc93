"""ListOffsets (key 2), v1-v11: offsets by timestamp on the partition leader (Kafka `handleListOffsetRequest`).

Special timestamps: LATEST -1 (the HW, or the LSO under read_committed), EARLIEST -2,
MAX_TIMESTAMP -3, EARLIEST_LOCAL -4, LATEST_TIERED -5; with no tiered storage
EARLIEST_PENDING_UPLOAD -6 finds nothing. Nothing found answers offset -1, timestamp -1.
A topic without DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED (Kafka's authorization).
"""

from __future__ import annotations

import datetime
from collections import Counter
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import DESCRIBE, TOPIC
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.outcomes import PartitionError, TimestampOffset
from kmirror.types import TopicPartition

EARLIEST_PENDING_UPLOAD_TIMESTAMP = -6
# Kafka's `ListOffsetsRequest` replica ids: consumers and the debugging consumer.
CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2


@api(2, "ListOffsets", 1, 11)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    TopicResponse = nested(rt, "ListOffsetsTopicResponse")
    PartitionResponse = nested(rt, "ListOffsetsPartitionResponse")
    rm = services.replica_manager
    isolation_level = int(getattr(request, "isolation_level", 0))
    # A follower (replica_id >= 0) reads the leader's raw log bounds: LATEST is the LEO.
    from_replica = int(getattr(request, "replica_id", CONSUMER_REPLICA_ID)) >= 0
    topics = []
    describable = services.authorization.filter(ctx, DESCRIBE, TOPIC, (t.name for t in request.topics))
    for topic in request.topics:
        # Kafka answers a partition listed twice with INVALID_REQUEST.
        counts = Counter(int(p.partition_index) for p in topic.partitions)
        duplicates = {index for index, n in counts.items() if n > 1}
        partitions = []
        for p in topic.partitions:
            index = int(p.partition_index)
            tp = TopicPartition(topic.name, index)
            timestamp = int(p.timestamp)
            result: TimestampOffset | None | PartitionError
            if topic.name not in describable:
                result = PartitionError(ErrorCode.topic_authorization_failed)
            elif index in duplicates:
                result = PartitionError(ErrorCode.invalid_request)
            elif timestamp == EARLIEST_PENDING_UPLOAD_TIMESTAMP:
                found = rm.leader_partition(tp)
                result = found if isinstance(found, PartitionError) else None
            else:
                result = rm.list_offset(
                    tp, timestamp, isolation_level, int(getattr(p, "current_leader_epoch", -1)), from_replica=from_replica
                )
            partitions.append(_partition_response(PartitionResponse, index, result))
        topics.append(TopicResponse(name=topic.name, partitions=tuple(partitions)))
    return build(rt, throttle_time=datetime.timedelta(0), topics=tuple(topics))


def _partition_response(cls: type, index: int, result: TimestampOffset | None | PartitionError) -> Any:
    if isinstance(result, PartitionError):
        return build(cls, partition_index=index, error_code=result.code, timestamp=-1, offset=-1, leader_epoch=-1)
    if result is None:
        return build(cls, partition_index=index, error_code=ErrorCode.none, timestamp=-1, offset=-1, leader_epoch=-1)
    return build(
        cls,
        partition_index=index,
        error_code=ErrorCode.none,
        timestamp=result.timestamp,
        offset=result.offset,
        leader_epoch=result.leader_epoch,
    )
