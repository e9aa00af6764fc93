"""Which replica a consumer should fetch from (KIP-392, Kafka `RackAwareReplicaSelector`).

With a client rack: the leader if it is in that rack, else the same-rack replica with the
highest log end offset (ties: the most recently caught up); the leader when no replica
shares the client's rack. Without a client rack: the leader.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ReplicaView:
    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_last_caught_up_ms: int


def select_preferred_read_replica(client_rack: str | None, replicas: Sequence[ReplicaView], leader_id: int) -> int | None:
    """The chosen broker id (None when `replicas` is empty)."""
    if not replicas:
        return None
    if not client_rack:
        return leader_id
    same_rack = [r for r in replicas if r.rack == client_rack]
    if not same_rack:
        return leader_id
    if any(r.broker_id == leader_id for r in same_rack):
        return leader_id
    best = max(same_rack, key=lambda r: (r.log_end_offset, -r.time_since_last_caught_up_ms))
    return best.broker_id
