"""InitProducerId (key 22), v0-v5: producer ids for idempotent and transactional producers
(KIP-98, KIP-360).

Without a transactional id Kafka always hands out a fresh producer id with epoch 0, even
when the producer names its old id (KIP-360 epoch bump). With one, the transaction
coordinator answers (`TransactionCoordinatorService.init_producer_id`): epoch bumps,
fencing, aborting an ongoing transaction. Ids come from blocks the controller allocates to
this node (`kmirror.replication.producer_id_source`). Before v4 PRODUCER_FENCED is spelled
INVALID_PRODUCER_EPOCH (KIP-588).

Authorization (Kafka's): WRITE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); without one, IDEMPOTENT_WRITE on the cluster or WRITE
on some topic (KIP-679), else CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import IDEMPOTENT_WRITE, TOPIC, TRANSACTIONAL_ID, WRITE
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.producer_id_source import producer_id_source


@api(22, "InitProducerId", 0, 5)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    authorization = services.authorization
    if request.transactional_id is not None:
        if not authorization.authorize(ctx, WRITE, TRANSACTIONAL_ID, request.transactional_id):
            return _response(rt, ErrorCode.transactional_id_authorization_failed)
    elif not (authorization.authorize_cluster(ctx, IDEMPOTENT_WRITE, log_if_denied=False)
              or authorization.authorize_any(ctx, WRITE, TOPIC)):
        return _response(rt, ErrorCode.cluster_authorization_failed)
    if services.metadata is None:
        return _response(rt, ErrorCode.coordinator_not_available)
    if request.transactional_id is not None:
        coordinator = services.transaction_coordinator
        if coordinator is None:
            return _response(rt, ErrorCode.coordinator_not_available)
        result = await coordinator.init_producer_id(
            transactional_id=request.transactional_id,
            transaction_timeout_ms=_ms(request.transaction_timeout),
            producer_id=int(getattr(request, "producer_id", -1)),
            producer_epoch=int(getattr(request, "producer_epoch", -1)),
        )
        error = result.error
        if error == ErrorCode.producer_fenced and ctx.api_version < 4:
            error = ErrorCode.invalid_producer_epoch
        return _response(rt, error, result.producer_id, result.producer_epoch)
    source = producer_id_source(services.metadata, services.node_id)
    error = await source.reserve()
    if error != ErrorCode.none:
        return _response(rt, error)
    return _response(rt, ErrorCode.none, source.next_producer_id(), 0)


def _ms(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


def _response(rt: type, code: ErrorCode, producer_id: int = -1, producer_epoch: int = -1) -> Any:
    return build(
        rt,
        throttle_time=datetime.timedelta(0),
        error_code=code,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )
