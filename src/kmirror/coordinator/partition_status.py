"""Which coordinator partitions this node serves, and the error a request for a key in one
of them gets (Kafka `CoordinatorRuntime`: a partition is loading, active, or not here).
Shared by the group, transaction and KIP-1279 mirror coordinator cores."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum

from kmirror.protocol.errors import ErrorCode


class PartitionStatus(Enum):
    LOADING = "loading"
    LOADED = "loaded"


def partition_coordinator_error(partitions: Mapping[int, PartitionStatus], partition: int) -> ErrorCode | None:
    """NOT_COORDINATOR unless this node leads `partition`; COORDINATOR_LOAD_IN_PROGRESS while
    it replays it; None once loaded."""
    status = partitions.get(partition)
    if status is None:
        return ErrorCode.not_coordinator
    if status is PartitionStatus.LOADING:
        return ErrorCode.coordinator_load_in_progress
    return None
