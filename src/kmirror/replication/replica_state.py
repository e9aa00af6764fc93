"""What a leader knows about one follower (Kafka `Replica` / `ReplicaState`).

A value updated on every follower Fetch. The caught-up rule (Kafka's ISR rule, `replica.lag.time.max.ms`): a follower
is caught up when its log end offset equals the leader's, or when it was caught up within
`replica.lag.time.max.ms`. "Caught up at time t" is Kafka's `updateFetchState`: a fetch at
or past the leader's LEO catches up now; a fetch at or past the leader LEO seen by the
previous fetch proves the follower was caught up when that previous fetch happened.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

UNKNOWN_OFFSET = -1
# `last_caught_up_time_ms` of a follower never seen caught up.
NEVER_MS = -(1 << 62)


@dataclass(frozen=True, slots=True)
class ReplicaState:
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_caught_up_time_ms: int = NEVER_MS
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = NEVER_MS
    broker_epoch: int = -1

    def update_fetch_state(
        self, fetch_offset: int, log_start_offset: int, fetch_time_ms: int, leader_end_offset: int, broker_epoch: int
    ) -> ReplicaState:
        caught_up = self.last_caught_up_time_ms
        if fetch_offset >= leader_end_offset:
            caught_up = max(caught_up, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset >= 0 and self.last_fetch_time_ms != NEVER_MS:
            caught_up = max(caught_up, self.last_fetch_time_ms)
        return ReplicaState(
            log_end_offset=fetch_offset,
            log_start_offset=log_start_offset,
            last_caught_up_time_ms=caught_up,
            last_fetch_leader_log_end_offset=leader_end_offset,
            last_fetch_time_ms=fetch_time_ms,
            broker_epoch=broker_epoch,
        )

    def is_caught_up(self, leader_end_offset: int, now_ms: int, replica_lag_time_max_ms: int) -> bool:
        return self.log_end_offset == leader_end_offset or now_ms - self.last_caught_up_time_ms <= replica_lag_time_max_ms

    def reset(self, now_ms: int, leader_end_offset: int, is_new_leader: bool, in_sync: bool) -> ReplicaState:
        """Kafka `Replica.resetReplicaState` on a new leader epoch: a new leader forgets the
        follower's offsets; ISR members get a fresh `replica.lag.time.max.ms` to fetch."""
        caught_up = now_ms if in_sync else NEVER_MS
        if is_new_leader:
            return ReplicaState(last_caught_up_time_ms=caught_up, broker_epoch=self.broker_epoch)
        return replace(
            self,
            last_caught_up_time_ms=caught_up,
            last_fetch_leader_log_end_offset=leader_end_offset,
            last_fetch_time_ms=now_ms if in_sync else self.last_fetch_time_ms,
        )
