"""AddPartitionsToTxn (key 24), v0-v3: the client path of KIP-98. v4+ (batched, and
`verify_only` for KIP-890 partition leaders) is not served yet.

Like Kafka's `KafkaApis.handleAddPartitionsToTxnRequest`: partitions of unknown topics answer
UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, without asking the
coordinator; otherwise every partition gets the coordinator's one answer. Before v2
PRODUCER_FENCED is spelled INVALID_PRODUCER_EPOCH (KIP-588).
"""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.broker.txn_errors import coordinator_error_for_version
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.types import TopicPartition


@api(24, "AddPartitionsToTxn", 0, 3)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    wanted = [TopicPartition(t.name, int(p)) for t in request.v3_and_below_topics for p in t.partitions]
    image = getattr(services.metadata, "image", None)
    unknown = {tp for tp in wanted if image is None or tp.topic not in image.topics
               or tp.partition not in image.topics[tp.topic].partitions}
    errors: dict[TopicPartition, ErrorCode]
    if unknown:
        errors = {tp: ErrorCode.unknown_topic_or_partition if tp in unknown else ErrorCode.operation_not_attempted
                  for tp in wanted}
    elif services.transaction_coordinator is None:
        errors = dict.fromkeys(wanted, ErrorCode.coordinator_not_available)
    else:
        error = await services.transaction_coordinator.add_partitions(
            transactional_id=request.v3_and_below_transactional_id,
            producer_id=int(request.v3_and_below_producer_id),
            producer_epoch=int(request.v3_and_below_producer_epoch), partitions=wanted)
        errors = dict.fromkeys(wanted, coordinator_error_for_version(error, ctx.api_version, fenced_since=2))
    rt = ctx.response_type
    TopicResult = nested(rt, "AddPartitionsToTxnTopicResult")
    PartitionResult = nested(rt, "AddPartitionsToTxnPartitionResult")
    by_topic: dict[str, list[Any]] = {}
    for tp, error in errors.items():
        by_topic.setdefault(tp.topic, []).append(PartitionResult(partition_index=tp.partition,
                                                                 partition_error_code=error))
    return build(rt, throttle_time=datetime.timedelta(0), results_by_topic_v3_and_below=tuple(
        TopicResult(name=name, results_by_partition=tuple(parts)) for name, parts in by_topic.items()))
