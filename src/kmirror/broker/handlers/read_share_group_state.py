"""ReadShareGroupState (key 84, v0; KIP-932): a share partition leader reads the stored state
of its share partitions from the group's coordinator (`coordinator/share_group/state_store`).
A partition without a stored state answers start offset -1 and no batches; a request
without a group id or topic id INVALID_REQUEST. Inter-broker:
CLUSTER_ACTION on the cluster (Kafka's)."""

from __future__ import annotations

from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.coordinator.share_group.state_records import ShareStateKey
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


@api(84, "ReadShareGroupState", 0, 0)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    Result, Partition, Batch = nested(rt, "ReadStateResult"), nested(rt, "PartitionResult"), nested(rt, "StateBatch")
    results = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            found = (ErrorCode.invalid_request if topic.topic_id is None or not request.group_id else
                     services.groups.read_share_state(ShareStateKey(request.group_id, topic.topic_id, int(p.partition))))
            error = found if isinstance(found, ErrorCode) else ErrorCode.none
            snapshot = None if isinstance(found, ErrorCode) else found
            partitions.append(build(
                Partition, partition=int(p.partition), error_code=error, error_message=None,
                state_epoch=snapshot.state_epoch if snapshot else 0,
                start_offset=snapshot.start_offset if snapshot else -1,
                state_batches=tuple(build(Batch, first_offset=f, last_offset=last, delivery_state=s, delivery_count=c)
                                    for f, last, s, c in (snapshot.state_batches if snapshot else ()))))
        results.append(build(Result, topic_id=topic.topic_id, partitions=tuple(partitions)))
    return build(rt, results=tuple(results))
