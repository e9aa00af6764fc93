"""The ports the `MirrorManager` runs the KIP-1279 partition lifecycle through, and their keys.

- `MirrorStateStore`: the persisted partition states (the mirror coordinator's
  ReadMirrorStates / WriteMirrorStates; `InMemoryMirrorStateStore` for tests and nodes
  without a coordinator);
- `LeaderEpochBumper`: BumpLeaderEpochs to the controller; the new epoch arrives later with
  a metadata image.
A port that cannot answer yet raises `StepPending`: the step stays pending and a later pass
resumes it from the persisted state.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

from kmirror.kip1279.state import MirrorPartitionState
from kmirror.types import TopicPartition


@dataclass(frozen=True, slots=True)
class PartitionKey:
    mirror_name: str
    topic_id: UUID
    partition: int


class StepPending(Exception):
    """A plan step cannot complete yet; reconcile again later."""


class MirrorStateStore(Protocol):
    async def load(self, key: PartitionKey) -> tuple[MirrorPartitionState, int] | None: ...

    async def save(self, key: PartitionKey, state: MirrorPartitionState | None, last_mirrored_epoch: int) -> None:
        """Persist (None: tombstone, back to UNKNOWN)."""
        ...


class InMemoryMirrorStateStore:
    def __init__(self) -> None:
        self.states: dict[PartitionKey, tuple[MirrorPartitionState, int]] = {}
        self.history: list[tuple[PartitionKey, MirrorPartitionState | None]] = []

    async def load(self, key: PartitionKey) -> tuple[MirrorPartitionState, int] | None:
        return self.states.get(key)

    async def save(self, key: PartitionKey, state: MirrorPartitionState | None, last_mirrored_epoch: int) -> None:
        self.history.append((key, state))
        if state is None:
            self.states.pop(key, None)
        else:
            self.states[key] = (state, last_mirrored_epoch)


class LeaderEpochBumper(Protocol):
    async def bump(self, tp: TopicPartition, topic_id: UUID, min_leader_epoch: int, min_producer_id: int) -> None:
        """BumpLeaderEpochs; the new epoch and producer id floor arrive later with the metadata
        image. `min_producer_id` -1: no producer id fence."""
        ...

    def producer_id_floor(self) -> int:
        """The producer id floor of the newest metadata image this broker applied."""
        ...


Concurrently = Callable[[Sequence[Awaitable[object]]], Awaitable[Sequence[object]]]
"""Runs awaitables together, answering each one's result or exception in order."""
