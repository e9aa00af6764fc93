"""The node's one source of producer ids: idempotent producers (InitProducerId without a
transactional id) and the transaction coordinator draw from the same `ProducerIdManager`,
so no two producers of the cluster ever share an id. Blocks come from the controller
(`allocate_producer_ids`, KIP-730) when the current one is used up."""

from __future__ import annotations

import weakref
from typing import Protocol

from kmirror.metadata.controller_service import MetadataOperationError
from kmirror.metadata.image import MetadataImage
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.producer_ids import ProducerIdManager, producer_id_block_from


class ProducerIdBlocks(Protocol):
    """The node's metadata service: the controller's `MetadataService` or the broker's replica
    of the metadata log, which asks the controller (AllocateProducerIds, KIP-730)."""

    @property
    def image(self) -> MetadataImage:
        """`producer_id_floor`: no id below it may be handed out (a fence replayed)."""
        ...

    async def allocate_producer_ids(self, broker_id: int, /) -> tuple[int, int]:
        """A fresh block `(first_producer_id, size)`; raises `MetadataOperationError`."""
        ...


_SOURCES: weakref.WeakKeyDictionary[ProducerIdBlocks, ProducerIdSource] = weakref.WeakKeyDictionary()


class ProducerIdSource:
    def __init__(self, metadata: ProducerIdBlocks, node_id: int) -> None:
        self.metadata = metadata
        self.node_id = node_id
        self.manager = ProducerIdManager()
        self._ready: int | None = None

    def _floor(self) -> int:
        return self.metadata.image.producer_id_floor

    async def reserve(self) -> ErrorCode:
        """Make one id ready for `next_producer_id` (asking the controller for a block if
        needed). COORDINATOR_LOAD_IN_PROGRESS while no block can be had (Kafka's
        `RPCProducerIdManager`: retriable)."""
        if self._ready is not None and self._ready < self._floor():
            self._ready = None  # fenced since it was reserved
        if self._ready is not None:
            return ErrorCode.none
        producer_id = self.manager.next_producer_id(self._floor())
        if producer_id is None:
            try:
                allocated = await self.metadata.allocate_producer_ids(self.node_id)
            except MetadataOperationError:
                return ErrorCode.coordinator_load_in_progress
            if self._ready is not None:  # a concurrent reserve won
                return ErrorCode.none
            producer_id = self.manager.next_producer_id(self._floor())
            if producer_id is None:
                self.manager.add_block(producer_id_block_from(allocated))
                producer_id = self.manager.next_producer_id(self._floor())
        if producer_id is None:
            return ErrorCode.coordinator_load_in_progress
        self._ready = producer_id
        return ErrorCode.none

    def next_producer_id(self) -> int:
        """The id `reserve` made ready; raises when none is (a broken invariant)."""
        if self._ready is None:
            raise RuntimeError("no producer id reserved")
        producer_id, self._ready = self._ready, None
        return producer_id


def producer_id_source(metadata: ProducerIdBlocks, node_id: int) -> ProducerIdSource:
    """One source per metadata service (per node)."""
    source = _SOURCES.get(metadata)
    if source is None:
        source = _SOURCES[metadata] = ProducerIdSource(metadata, node_id)
    return source
