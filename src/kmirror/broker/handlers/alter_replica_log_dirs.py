"""AlterReplicaLogDirs (key 34, v1-2; KIP-113): move replicas between this broker's log dirs.
Each partition is answered at once (NONE: the move is under way, or the replica is there
already); the move runs in the background (`runtime.log_dir_mover`) and DescribeLogDirs shows
it as a future replica until it is done. Kafka's errors: LOG_DIR_NOT_FOUND for a path that
is not one of `log.dirs`, INVALID_REPLICA_ASSIGNMENT for a cordoned one (KIP-1066, as Kafka 4.3
answers it; the KIP said KAFKA_STORAGE_ERROR),
REPLICA_NOT_AVAILABLE for a partition this broker does not host. ALTER on the cluster is
needed (`api_authorization`)."""

from __future__ import annotations

import datetime
from typing import Any

from kio.static.primitive import i32

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.types import TopicPartition


@api(34, "AlterReplicaLogDirs", 1, 2)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    wanted: dict[TopicPartition, str] = {}  # a partition named twice goes where it is named last
    for d in request.dirs:
        for t in d.topics:
            for p in t.partitions:
                wanted[TopicPartition(t.name, int(p))] = d.path
    moves = services.log_dir_moves
    by_topic: dict[str, list[Any]] = {}
    partition_cls = nested(rt, "AlterReplicaLogDirPartitionResult")
    for tp, path in wanted.items():
        error = moves.alter(tp, path).code if moves is not None else ErrorCode.kafka_storage_error
        by_topic.setdefault(tp.topic, []).append(build(partition_cls, partition_index=i32(tp.partition),
                                                       error_code=error))
    topic_cls = nested(rt, "AlterReplicaLogDirTopicResult")
    return build(rt, throttle_time=datetime.timedelta(0), results=tuple(
        build(topic_cls, topic_name=topic, partitions=tuple(ps)) for topic, ps in by_topic.items()))
