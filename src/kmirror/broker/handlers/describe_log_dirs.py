"""DescribeLogDirs (key 35), v1-v5: partitions per log dir with sizes (KIP-113), the dirs'
total/usable bytes in v4 (KIP-827, from the replica manager's disk-usage port), and whether each
is cordoned in v5 (KIP-1066, `cordoned.log.dirs`). A replica being moved to another log dir
(AlterReplicaLogDirs) is also listed there as a future replica, with its offset lag."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.types import TopicPartition


@api(35, "DescribeLogDirs", 1, 5)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    Result = nested(rt, "DescribeLogDirsResult")
    Topic = nested(rt, "DescribeLogDirsTopic")
    Partition = nested(rt, "DescribeLogDirsPartition")
    wanted = None
    if request.topics is not None:
        wanted = [TopicPartition(t.topic, int(p)) for t in request.topics for p in t.partitions]
    results = []
    cordoned = (services.config.cordoned_log_dirs(services.metadata.image.broker_config(services.node_id))
                if ctx.api_version >= 5 else ())
    futures: dict[str, list[tuple[TopicPartition, int, int]]] = {}
    if services.log_dir_moves is not None:
        for tp, future_dir, size, lag in services.log_dir_moves.futures():
            if wanted is None or tp in wanted:
                futures.setdefault(future_dir, []).append((tp, size, lag))
    for log_dir in services.replica_manager.describe_log_dirs(wanted):
        by_topic: dict[str, list[Any]] = {}
        for (topic, index), described in sorted(log_dir.partitions.items()):
            by_topic.setdefault(topic, []).append(
                Partition(
                    partition_index=index,
                    partition_size=described.size_bytes,
                    offset_lag=described.offset_lag,
                    is_future_key=described.is_future,
                )
            )
        for tp, size, lag in sorted(futures.get(log_dir.path, ())):  # moves under way (AlterReplicaLogDirs)
            by_topic.setdefault(tp.topic, []).append(
                Partition(partition_index=tp.partition, partition_size=size, offset_lag=lag, is_future_key=True))
        results.append(
            build(
                Result,
                error_code=log_dir.error,
                log_dir=log_dir.path,
                topics=tuple(Topic(name=t, partitions=tuple(ps)) for t, ps in by_topic.items()),
                total_bytes=log_dir.total_bytes,
                usable_bytes=log_dir.usable_bytes,
                is_cordoned=log_dir.path in cordoned,
            )
        )
    return build(rt, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, results=tuple(results))
