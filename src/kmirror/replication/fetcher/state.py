"""Per-partition fetch state of the fetch engine (Kafka `PartitionFetchState`).

TRUNCATING: the local log may hold records the leader does not have; find where it diverges
(OffsetsForLeaderEpoch) before fetching. FETCHING: fetch from `fetch_offset`, sending
`last_fetched_epoch` so the leader can answer with a diverging epoch (Fetch v12+, KIP-595
style truncation on fetch). RESETTING: the fetch offset was out of the leader's range; ask
the leader for its log start/end offsets. FENCED: the leader says our leader epoch is stale;
wait for the metadata image to bring a new one (the partition is re-added then).
A partition may also be DELAYED (backing off after an error) until `delay_until_ms`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from uuid import UUID

from kmirror.types import TopicPartition


# Transition table: phase -> phases it may move to (an illegal transition is a bug).
class FetchPhase(Enum):
    TRUNCATING = "truncating"
    FETCHING = "fetching"
    RESETTING = "resetting"
    FENCED = "fenced"


VALID_TRANSITIONS: dict[FetchPhase, frozenset[FetchPhase]] = {
    FetchPhase.TRUNCATING: frozenset({FetchPhase.TRUNCATING, FetchPhase.FETCHING, FetchPhase.RESETTING, FetchPhase.FENCED}),
    FetchPhase.FETCHING: frozenset({FetchPhase.FETCHING, FetchPhase.TRUNCATING, FetchPhase.RESETTING, FetchPhase.FENCED}),
    FetchPhase.RESETTING: frozenset({FetchPhase.RESETTING, FetchPhase.FETCHING, FetchPhase.FENCED}),
    FetchPhase.FENCED: frozenset({FetchPhase.FENCED}),
}


class IllegalFetchTransition(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class PartitionFetchState:
    topic_partition: TopicPartition
    topic_id: UUID
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int  # -1 when the local log has no epoch
    phase: FetchPhase
    delay_until_ms: int = 0
    # KIP-1279: the latest MirrorLeaderEpoch the leader answered (-1: none, not a mirror partition)
    mirror_leader_epoch: int = -1

    def to(self, phase: FetchPhase, **changes: object) -> PartitionFetchState:
        if phase not in VALID_TRANSITIONS[self.phase]:
            raise IllegalFetchTransition(f"{self.topic_partition}: {self.phase.value} -> {phase.value}")
        # `dataclasses.replace` without its per-call field introspection: this runs for every
        # batch a fetcher appends.
        values = {"topic_partition": self.topic_partition, "topic_id": self.topic_id,
                  "fetch_offset": self.fetch_offset, "current_leader_epoch": self.current_leader_epoch,
                  "last_fetched_epoch": self.last_fetched_epoch, "phase": phase,
                  "delay_until_ms": self.delay_until_ms, "mirror_leader_epoch": self.mirror_leader_epoch}
        values.update(changes)
        return PartitionFetchState(**values)  # type: ignore[arg-type]

    def delayed(self, until_ms: int) -> PartitionFetchState:
        return replace(self, delay_until_ms=until_ms)

    def is_ready(self, now_ms: int) -> bool:
        return self.delay_until_ms <= now_ms
