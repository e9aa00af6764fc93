"""WriteTxnMarkers (key 27, v1-v2): the transaction coordinator asks this partition leader to
write COMMIT/ABORT markers (`kmirror.broker.txn_markers`). An inter-broker API: clients never
send it. v0 is gone from Kafka 4; v2 adds the transaction version, which does not change how
a marker is written."""

from __future__ import annotations

from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import CLUSTER_ACTION
from kmirror.broker.services import BrokerServices
from kmirror.broker.txn_markers import MarkerEntry, write_txn_markers
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.types import TopicPartition


@api(27, "WriteTxnMarkers", 1, 2)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    entries = [
        MarkerEntry(int(m.producer_id), int(m.producer_epoch), bool(m.transaction_result), int(m.coordinator_epoch),
                    tuple(TopicPartition(t.name, int(p)) for t in m.topics for p in t.partition_indexes))
        for m in request.markers
    ]
    if services.authorization.authorize_cluster(ctx, CLUSTER_ACTION):
        answers = await write_txn_markers(services, entries)
    else:  # Kafka: CLUSTER_ACTION, else every partition is refused
        answers = [dict.fromkeys(e.partitions, ErrorCode.cluster_authorization_failed) for e in entries]
    rt = ctx.response_type
    Result = nested(rt, "WritableTxnMarkerResult")
    TopicResult = nested(rt, "WritableTxnMarkerTopicResult")
    PartitionResult = nested(rt, "WritableTxnMarkerPartitionResult")
    results = []
    for entry, errors in zip(entries, answers, strict=True):
        by_topic: dict[str, list[Any]] = {}
        for tp, error in errors.items():
            by_topic.setdefault(tp.topic, []).append(PartitionResult(partition_index=tp.partition, error_code=error))
        results.append(Result(producer_id=entry.producer_id, topics=tuple(
            TopicResult(name=name, partitions=tuple(parts)) for name, parts in by_topic.items())))
    return build(rt, markers=tuple(results))
