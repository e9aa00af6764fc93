"""WriteShareGroupState (key 85, v0; KIP-932): a share partition leader stores the state of a
share partition (its whole snapshot) at the group's coordinator, answered once appended to
`__consumer_offsets` (`coordinator/share_group/state_store`); a state no share partition could
have (no group or topic id, batches out of order or of an unknown state) is INVALID_REQUEST. Inter-broker: CLUSTER_ACTION
on the cluster (Kafka's)."""

from __future__ import annotations

from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.coordinator.share_group.state_records import ShareSnapshot, ShareStateKey
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


@api(85, "WriteShareGroupState", 0, 0)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    Result, Partition = nested(rt, "WriteStateResult"), nested(rt, "PartitionResult")
    results = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            snapshot = ShareSnapshot(int(p.state_epoch), int(p.leader_epoch), int(p.start_offset), tuple(
                (int(b.first_offset), int(b.last_offset), int(b.delivery_state), int(b.delivery_count))
                for b in p.state_batches))
            error = ErrorCode.invalid_request if topic.topic_id is None else await services.groups.write_share_state(
                ShareStateKey(request.group_id, topic.topic_id, int(p.partition)), snapshot)
            partitions.append(build(Partition, partition=int(p.partition), error_code=error, error_message=None))
        results.append(build(Result, topic_id=topic.topic_id, partitions=tuple(partitions)))
    return build(rt, results=tuple(results))
