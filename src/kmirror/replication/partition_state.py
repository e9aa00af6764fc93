"""The registration a hosted partition follows (from the image's `PartitionRegistration`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PartitionState:
    """The registration this node follows (from `PartitionRegistration` in the metadata image)."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
