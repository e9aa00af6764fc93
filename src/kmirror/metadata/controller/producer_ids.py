"""Producer id blocks (Kafka's ProducerIdControlManager): blocks of 1000 ids per request."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.result import ApiError, ControllerResult
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.records import NO_BROKER, ProducerIdsRecord, Record

PRODUCER_ID_BLOCK_SIZE = 1000
MAX_PRODUCER_ID = 2**63 - 1


def fence_producer_ids(image: MetadataImage, min_producer_id: int) -> list[Record]:
    """KIP-1279 failover ("new producers get fresh PIDs, separate from previously mirrored
    IDs"): no producer id below `min_producer_id` is handed out after these records. One
    ProducerIdsRecord with broker id -1 moves the next block to at least `min_producer_id` and,
    replayed by every broker, sets the image's `producer_id_floor`, below which brokers drop
    the ids left in their current blocks. Nothing when the floor is already there."""
    if min_producer_id <= image.producer_id_floor:
        return []
    return [ProducerIdsRecord(NO_BROKER, -1, max(image.next_producer_id, min_producer_id))]


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
