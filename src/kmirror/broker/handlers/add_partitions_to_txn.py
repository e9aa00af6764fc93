"""AddPartitionsToTxn (key 24), v0-v4.

v0-v3 are the client path of KIP-98. v4 batches several transactions and is sent by brokers:
with `verify_only` (KIP-890 part 1) a partition leader asks whether partitions are in a
producer's ongoing transaction, and nothing is written; without it the partitions are added.
v5 (transaction version 2) is not served.

Like Kafka's `KafkaApis.handleAddPartitionsToTxnRequest`: partitions of unknown topics answer
UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, without asking the
coordinator; otherwise every partition gets the coordinator's one answer. Before v2
PRODUCER_FENCED is spelled INVALID_PRODUCER_EPOCH (KIP-588).

Authorization (Kafka's): v4 is an inter-broker request and needs CLUSTER_ACTION (else the
request is answered CLUSTER_AUTHORIZATION_FAILED); v0-v3 need WRITE on the transactional id
(else every partition gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic (else its
partitions get TOPIC_AUTHORIZATION_FAILED and the others OPERATION_NOT_ATTEMPTED).
"""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import CLUSTER_ACTION, TOPIC, TRANSACTIONAL_ID, WRITE
from kmirror.broker.services import BrokerServices
from kmirror.broker.txn_errors import coordinator_error_for_version
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.types import TopicPartition


@api(24, "AddPartitionsToTxn", 0, 4)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    TopicResult = nested(rt, "AddPartitionsToTxnTopicResult")
    PartitionResult = nested(rt, "AddPartitionsToTxnPartitionResult")

    def topic_results(errors: dict[TopicPartition, ErrorCode]) -> tuple[Any, ...]:
        by_topic: dict[str, list[Any]] = {}
        for tp, error in errors.items():
            by_topic.setdefault(tp.topic, []).append(PartitionResult(partition_index=tp.partition,
                                                                     partition_error_code=error))
        return tuple(TopicResult(name=name, results_by_partition=tuple(parts)) for name, parts in by_topic.items())

    if ctx.api_version < 4:
        wanted = [TopicPartition(t.name, int(p)) for t in request.v3_and_below_topics for p in t.partitions]
        errors = await _add(services, ctx, request.v3_and_below_transactional_id,
                            int(request.v3_and_below_producer_id), int(request.v3_and_below_producer_epoch),
                            wanted, verify_only=False)
        return build(rt, throttle_time=datetime.timedelta(0), results_by_topic_v3_and_below=topic_results(errors))
    if not services.authorization.authorize_cluster(ctx, CLUSTER_ACTION):
        return build(rt, throttle_time=datetime.timedelta(0), error_code=ErrorCode.cluster_authorization_failed,
                     results_by_transaction=())
    Result = nested(rt, "AddPartitionsToTxnResult")
    results = []
    for txn in request.transactions:
        wanted = [TopicPartition(t.name, int(p)) for t in txn.topics for p in t.partitions]
        errors = await _add(services, ctx, txn.transactional_id, int(txn.producer_id), int(txn.producer_epoch),
                            wanted, verify_only=bool(txn.verify_only))
        results.append(Result(transactional_id=txn.transactional_id, topic_results=topic_results(errors)))
    return build(rt, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none,
                 results_by_transaction=tuple(results))


async def _add(services: BrokerServices, ctx: RequestContext, transactional_id: str, producer_id: int,
               producer_epoch: int, wanted: list[TopicPartition], *, verify_only: bool) -> dict[TopicPartition, ErrorCode]:
    if ctx.api_version < 4:
        authorization = services.authorization
        if not authorization.authorize(ctx, WRITE, TRANSACTIONAL_ID, transactional_id):
            return dict.fromkeys(wanted, ErrorCode.transactional_id_authorization_failed)
        writable = authorization.filter(ctx, WRITE, TOPIC, {tp.topic for tp in wanted})
        if any(tp.topic not in writable for tp in wanted):
            return {tp: ErrorCode.operation_not_attempted if tp.topic in writable
                    else ErrorCode.topic_authorization_failed for tp in wanted}
    coordinator = services.transaction_coordinator
    if coordinator is None:
        return dict.fromkeys(wanted, ErrorCode.coordinator_not_available)
    if verify_only:
        return coordinator.verify_local(  # type: ignore[no-any-return]
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            partitions=wanted)
    image = getattr(services.metadata, "image", None)
    unknown = {tp for tp in wanted if image is None or tp.topic not in image.topics
               or tp.partition not in image.topics[tp.topic].partitions}
    if unknown:
        return {tp: ErrorCode.unknown_topic_or_partition if tp in unknown else ErrorCode.operation_not_attempted
                for tp in wanted}
    error = await coordinator.add_partitions(transactional_id=transactional_id, producer_id=producer_id,
                                             producer_epoch=producer_epoch, partitions=wanted)
    return dict.fromkeys(wanted, coordinator_error_for_version(error, ctx.api_version, fenced_since=2))
