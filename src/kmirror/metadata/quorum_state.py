"""What the active controller knows of the nodes replicating its metadata log, for
DescribeQuorum (KIP-595, KIP-836): each observer's fetch position and when it was last caught
up, as Kafka's `LeaderState` keeps them.

Brokers are observers: they fetch the log and never vote. With one active controller the
leader is the only voter (docs/design/controller.md).
"""

from __future__ import annotations

from dataclasses import dataclass, field

OBSERVER_SESSION_TIMEOUT_MS = 300_000
"""An observer that has not fetched for this long is no longer listed (Kafka's
`LeaderState.OBSERVER_SESSION_TIMEOUT_MS`)."""


@dataclass(slots=True)
class ReplicaFetchState:
    log_end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    leader_end_at_last_fetch: int = -1

    def fetched(self, fetch_offset: int, leader_end_offset: int, now_ms: int) -> None:
        """Kafka's `ReplicaState.updateFollowerState`: caught up now if the fetch reaches the
        leader's end; caught up at its previous fetch if it reaches the end the leader had
        then."""
        if fetch_offset >= leader_end_offset:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif self.leader_end_at_last_fetch > 0 and fetch_offset >= self.leader_end_at_last_fetch:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.leader_end_at_last_fetch = leader_end_offset
        self.last_fetch_ms = now_ms


@dataclass(slots=True)
class QuorumObservers:
    replicas: dict[int, ReplicaFetchState] = field(default_factory=dict)

    def fetched(self, replica_id: int, fetch_offset: int, leader_end_offset: int, now_ms: int) -> None:
        """A fetch of the metadata log by `replica_id` (unknown replicas, id < 0, are not tracked)."""
        if replica_id >= 0:
            self.replicas.setdefault(replica_id, ReplicaFetchState()).fetched(fetch_offset, leader_end_offset, now_ms)

    def current(self, now_ms: int, leader_id: int) -> dict[int, ReplicaFetchState]:
        """The observers that fetched within the session timeout, by id (the leader excluded)."""
        for replica_id in [r for r, s in self.replicas.items() if now_ms - s.last_fetch_ms > OBSERVER_SESSION_TIMEOUT_MS]:
            del self.replicas[replica_id]
        return {r: s for r, s in sorted(self.replicas.items()) if r != leader_id}
