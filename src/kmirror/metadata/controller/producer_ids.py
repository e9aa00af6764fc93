"""Producer id blocks (Kafka's ProducerIdControlManager): blocks of 1000 ids per request."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.result import ApiError, ControllerResult
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.records import ProducerIdsRecord

PRODUCER_ID_BLOCK_SIZE = 1000
MAX_PRODUCER_ID = 2**63 - 1


def allocate_producer_ids(
    image: MetadataImage, broker_id: int, broker_epoch: int = -1
) -> ControllerResult[tuple[int, int] | ApiError]:
    """The next block `(first_producer_id, size)`; STALE_BROKER_EPOCH when the broker is not
    registered with that epoch (-1 skips the epoch check: the local broker of a combined node)."""
    broker = image.brokers.get(broker_id)
    if broker is None or (broker_epoch != -1 and broker.broker_epoch != broker_epoch):
        return ControllerResult([], ApiError(ErrorCode.stale_broker_epoch, f"Broker {broker_id} epoch mismatch."))
    first = image.next_producer_id
    if first > MAX_PRODUCER_ID - PRODUCER_ID_BLOCK_SIZE:
        return ControllerResult([], ApiError(ErrorCode.unknown_server_error, "Exhausted all producer ids."))
    record = ProducerIdsRecord(broker_id, broker.broker_epoch, first + PRODUCER_ID_BLOCK_SIZE)
    return ControllerResult([record], (first, PRODUCER_ID_BLOCK_SIZE))
