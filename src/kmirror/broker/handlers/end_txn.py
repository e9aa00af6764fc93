"""EndTxn (key 26), v0-v4: commit or abort (Kafka `handleEndTxnRequest`). Answered once the
coordinator persisted PrepareCommit / PrepareAbort; markers follow. v5 (KIP-890 part 2,
transaction version 2) is not served. Before v2 PRODUCER_FENCED is INVALID_PRODUCER_EPOCH."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.broker.txn_errors import coordinator_error_for_version
from kmirror.protocol.entities import build
from kmirror.protocol.errors import ErrorCode


@api(26, "EndTxn", 0, 4)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    coordinator = services.transaction_coordinator
    if coordinator is None:
        error = ErrorCode.coordinator_not_available
    else:
        error = await coordinator.end_txn(
            transactional_id=request.transactional_id, producer_id=int(request.producer_id),
            producer_epoch=int(request.producer_epoch), committed=bool(request.committed))
        error = coordinator_error_for_version(error, ctx.api_version, fenced_since=2)
    return build(ctx.response_type, throttle_time=datetime.timedelta(0), error_code=error)
