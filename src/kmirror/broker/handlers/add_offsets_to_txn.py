"""AddOffsetsToTxn (key 25), v0-v4: the group's `__consumer_offsets` partition joins the
transaction, so its TxnOffsetCommits get the transaction's marker (Kafka
`handleAddOffsetsToTxnRequest`). Before v2 PRODUCER_FENCED is INVALID_PRODUCER_EPOCH."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.broker.txn_errors import coordinator_error_for_version
from kmirror.protocol.entities import build
from kmirror.protocol.errors import ErrorCode
from kmirror.types import TopicPartition

CONSUMER_OFFSETS = "__consumer_offsets"


@api(25, "AddOffsetsToTxn", 0, 4)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    coordinator = services.transaction_coordinator
    if coordinator is None or services.group_coordinator is None:
        error = ErrorCode.coordinator_not_available
    elif not request.group_id:
        error = ErrorCode.invalid_group_id
    else:
        partition = services.groups.partition_for(request.group_id)
        error = await coordinator.add_partitions(
            transactional_id=request.transactional_id, producer_id=int(request.producer_id),
            producer_epoch=int(request.producer_epoch), partitions=[TopicPartition(CONSUMER_OFFSETS, partition)])
        error = coordinator_error_for_version(error, ctx.api_version, fenced_since=2)
    return build(ctx.response_type, throttle_time=datetime.timedelta(0), error_code=error)
