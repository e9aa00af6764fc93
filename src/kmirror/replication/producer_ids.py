"""Producer id blocks handed out by the controller (Kafka `ProducerIdManager`, KIP-730).

Sans-IO: the manager holds the node's current block and answers the next id, or None
when the block is used up and the node must ask the controller for a new one
(`MetadataService.allocate_producer_ids`), which the InitProducerId handler does.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1


class ProducerIdManager:
    def __init__(self) -> None:
        self._block: ProducerIdBlock | None = None
        self._next = 0

    def next_producer_id(self, floor: int = 0) -> int | None:
        """The next id of the current block, never below `floor` (the metadata image's
        `producer_id_floor`: ids below it were fenced, e.g. by a KIP-1279 failover)."""
        block = self._block
        self._next = max(self._next, floor)
        if block is None or self._next > block.last_producer_id:
            return None
        producer_id = self._next
        self._next += 1
        return producer_id

    def add_block(self, block: ProducerIdBlock) -> bool:
        """Take a newer block; ids left in the old one are dropped, never reused. A block not
        after the current one (a late answer to a concurrent request) is refused: False."""
        if block.size <= 0:
            raise ValueError(f"empty producer id block {block}")
        if self._block is not None and block.first_producer_id <= self._block.last_producer_id:
            return False
        self._block = block
        self._next = block.first_producer_id
        return True

def producer_id_block_from(allocated: object) -> ProducerIdBlock:
    """Read the controller's answer: a `(first, size)` pair or an object naming them the way
    Kafka's AllocateProducerIds response does (`producer_id_start`, `producer_id_len`)."""
    if isinstance(allocated, ProducerIdBlock):
        return allocated
    if isinstance(allocated, tuple):
        first, size = allocated
        return ProducerIdBlock(int(first), int(size))
    first = getattr(allocated, "first_producer_id", getattr(allocated, "producer_id_start", None))
    size = getattr(allocated, "size", getattr(allocated, "producer_id_len", None))
    if first is None or size is None:
        raise TypeError(f"not a producer id block: {allocated!r}")
    return ProducerIdBlock(int(first), int(size))
