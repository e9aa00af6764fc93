"""TxnOffsetCommit (key 28), v0-v4: offsets committed inside a transaction, sent by the
producer to the group coordinator (`kmirror.coordinator.offsets.txn_commits`): written as a
transactional batch of the producer, pending until the transaction's marker; v3+ carries the consumer's member and generation (KIP-447).
The group's `__consumer_offsets` partition must be in the producer's ongoing transaction
(AddOffsetsToTxn), verified with the transaction coordinator (KIP-890 part 1): else
INVALID_TXN_STATE, or INVALID_PRODUCER_EPOCH for a fenced producer at every version (Kafka's
verification spells the coordinator's PRODUCER_FENCED so). Commits for unknown topics are
UNKNOWN_TOPIC_OR_PARTITION.

Authorization (Kafka's): WRITE on the transactional id and READ on the group (else every
partition gets TRANSACTIONAL_ID_ or GROUP_AUTHORIZATION_FAILED), READ on each topic (else
TOPIC_AUTHORIZATION_FAILED)."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import GROUP, READ, TOPIC, TRANSACTIONAL_ID, WRITE
from kmirror.broker.services import BrokerServices
from kmirror.coordinator.offsets.commits import OffsetToCommit
from kmirror.coordinator.results import PartitionResult
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


@api(28, "TxnOffsetCommit", 0, 4)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    image = getattr(services.metadata, "image", None)
    authorization = services.authorization
    refused = None
    if not authorization.authorize(ctx, WRITE, TRANSACTIONAL_ID, request.transactional_id):
        refused = ErrorCode.transactional_id_authorization_failed
    elif not authorization.authorize(ctx, READ, GROUP, request.group_id):
        refused = ErrorCode.group_authorization_failed
    if refused is not None:
        return _answer(ctx, [PartitionResult(t.name, p.partition_index, refused)
                             for t in request.topics for p in t.partitions])
    readable = authorization.filter(ctx, READ, TOPIC, (t.name for t in request.topics))
    exists = (lambda topic: topic in image.topics) if image is not None else (lambda topic: True)

    def known(topic: str) -> bool:
        return topic in readable and exists(topic)

    unknown = [PartitionResult(t.name, p.partition_index, ErrorCode.unknown_topic_or_partition if t.name in readable
                               else ErrorCode.topic_authorization_failed)
               for t in request.topics if not known(t.name) for p in t.partitions]
    offsets = [OffsetToCommit(t.name, p.partition_index, p.committed_offset, getattr(p, "committed_leader_epoch", -1),
                              p.committed_metadata)
               for t in request.topics if known(t.name) for p in t.partitions]
    result = await services.groups.txn_commit_offsets(
        transactional_id=request.transactional_id, group_id=request.group_id, producer_id=int(request.producer_id), producer_epoch=int(request.producer_epoch),
        generation_id=int(getattr(request, "generation_id", -1)), member_id=getattr(request, "member_id", "") or "",
        group_instance_id=getattr(request, "group_instance_id", None), offsets=offsets)
    return _answer(ctx, [*result.partitions, *unknown])


def _answer(ctx: RequestContext, results: list[PartitionResult]) -> Any:
    rt = ctx.response_type
    Topic = nested(rt, "TxnOffsetCommitResponseTopic")
    Partition = nested(rt, "TxnOffsetCommitResponsePartition")
    by_topic: dict[str, list[Any]] = {}
    for r in results:
        by_topic.setdefault(r.topic, []).append(Partition(partition_index=r.partition, error_code=r.error))
    return build(rt, throttle_time=datetime.timedelta(0), topics=tuple(
        Topic(name=name, partitions=tuple(parts)) for name, parts in by_topic.items()))
