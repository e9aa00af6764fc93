"""The registration a hosted partition follows (from the image's `PartitionRegistration`),
whether this node hosts it, and what applying a new one changed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kmirror.metadata.image import PartitionRegistration


@dataclass(frozen=True, slots=True)
class PartitionState:
    """The registration this node follows (from `PartitionRegistration` in the metadata image)."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class RoleChange:
    """What applying a registration changed (Kafka `makeLeader` / `makeFollower` results)."""

    became_leader: bool = False
    # This node follows, and the leader or leader epoch changed: (re)start fetching.
    follow_leader: bool = False
    isr_changed: bool = False


def partition_state_from(registration: PartitionRegistration) -> PartitionState:
    """Read a metadata `PartitionRegistration` into the state a partition follows."""
    return PartitionState(
        leader=int(registration.leader),
        leader_epoch=int(registration.leader_epoch),
        partition_epoch=int(registration.partition_epoch),
        replicas=tuple(int(r) for r in registration.replicas),
        isr=tuple(int(r) for r in registration.isr),
    )


def hosted_here(registration: PartitionRegistration, node_id: int) -> bool:
    replicas: Iterable[int] = registration.replicas
    return node_id in replicas
