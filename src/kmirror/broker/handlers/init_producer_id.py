"""InitProducerId (key 22), v0-v5: producer ids for idempotent producers (KIP-98, KIP-360).

Without a transactional id Kafka always hands out a fresh producer id with epoch 0, even
when the producer names its old id (KIP-360 epoch bump). Ids come from blocks the
controller allocates to this node. Transactions are not served yet: a transactional id
is answered COORDINATOR_NOT_AVAILABLE.
"""

from __future__ import annotations

import datetime
import weakref
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller_service import MetadataOperationError
from kmirror.protocol.entities import build
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.producer_ids import ProducerIdManager, producer_id_block_from

_MANAGERS: weakref.WeakKeyDictionary[Any, ProducerIdManager] = weakref.WeakKeyDictionary()


def producer_id_manager(services: BrokerServices) -> ProducerIdManager:
    """One manager per metadata service (per node)."""
    manager = _MANAGERS.get(services.metadata)
    if manager is None:
        manager = _MANAGERS[services.metadata] = ProducerIdManager()
    return manager


@api(22, "InitProducerId", 0, 5)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    if request.transactional_id:
        return _response(rt, ErrorCode.coordinator_not_available)
    if services.metadata is None:
        return _response(rt, ErrorCode.coordinator_not_available)
    manager = producer_id_manager(services)
    floor = services.metadata.image.producer_id_floor
    producer_id = manager.next_producer_id(floor)
    if producer_id is None:
        try:
            allocated = await services.metadata.allocate_producer_ids(services.node_id)
        except MetadataOperationError:
            # Kafka's RPCProducerIdManager: no block yet -> retriable load-in-progress.
            return _response(rt, ErrorCode.coordinator_load_in_progress)
        block = producer_id_block_from(allocated)
        producer_id = manager.next_producer_id(floor)
        if producer_id is None:
            manager.add_block(block)
            producer_id = manager.next_producer_id(floor)
    if producer_id is None:
        return _response(rt, ErrorCode.coordinator_load_in_progress)
    return _response(rt, ErrorCode.none, producer_id, 0)


def _response(rt: type, code: ErrorCode, producer_id: int = -1, producer_epoch: int = -1) -> Any:
    return build(
        rt,
        throttle_time=datetime.timedelta(0),
        error_code=code,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )
