"""The leader's ISR changes (Kafka `Partition.maybeExpandIsr` / `maybeShrinkIsr` and the
AlterPartition answer handling), a part of `Partition`.

Seed 004 "ISR": a follower joins when its LEO reached the HW and the start of the current
leader epoch; an ISR follower leaves when it has not been caught up for
`replica.lag.time.max.ms`. Changes are proposals (`AlterPartitionItem`, at most one in flight)
that count only once the controller commits them; see `IsrState` for the maximal ISR.
"""

from __future__ import annotations

from collections.abc import Callable
from uuid import UUID

from kmirror.protocol.errors import ErrorCode
from kmirror.replication.isr_state import IsrState
from kmirror.replication.log_port import PartitionLog
from kmirror.replication.outcomes import AlterPartitionItem
from kmirror.replication.partition_state import PartitionState
from kmirror.replication.replica_state import NEVER_MS, ReplicaState
from kmirror.types import TopicPartition


class IsrChanges:
    # Provided by `Partition`.
    topic_partition: TopicPartition
    topic_id: UUID
    local_broker_id: int
    replica_lag_time_max_ms: int
    leader_epoch_start_offset: int | None
    isr_shrinks: int
    isr_expands: int
    _state: PartitionState
    _isr_state: IsrState
    _replicas: dict[int, ReplicaState]
    isr_eligible: Callable[[int, int], bool]
    """(broker id, broker epoch of its fetches) -> may it join an ISR (Kafka
    `isReplicaIsrEligible`: registered, unfenced, not in controlled shutdown, same epoch)."""

    @property
    def log(self) -> PartitionLog:
        raise NotImplementedError

    @property
    def is_leader(self) -> bool:
        return self._state.leader == self.local_broker_id

    def _tick(self, now_ms: int | None) -> int:
        raise NotImplementedError

    def maybe_increment_high_watermark(self, now_ms: int | None = None) -> bool:
        raise NotImplementedError

    def _is_follower_in_sync(self, replica_id: int) -> bool:
        """Kafka `isFollowerInSync`: the follower's LEO reached the HW and the start of this
        leader's epoch (so it holds everything this leader acknowledged)."""
        st = self._replicas.get(replica_id)
        start = self.leader_epoch_start_offset
        return st is not None and start is not None and st.log_end_offset >= self.log.high_watermark and st.log_end_offset >= start

    def maybe_expand_isr(self, replica_id: int, now_ms: int) -> AlterPartitionItem | None:
        """Propose adding a caught-up follower to the ISR (one change in flight at most)."""
        self._tick(now_ms)
        if not self.is_leader or self._isr_state.is_inflight or replica_id in self._isr_state.isr:
            return None
        if replica_id not in self._state.replicas or not self._is_follower_in_sync(replica_id):
            return None
        if not self.isr_eligible(replica_id, self._replicas[replica_id].broker_epoch):
            return None  # the controller would refuse it (INELIGIBLE_REPLICA)
        self._isr_state = self._isr_state.expanding(replica_id)
        return self.pending_alter_partition()

    def out_of_sync_replicas(self, now_ms: int) -> frozenset[int]:
        """ISR followers not caught up within `replica.lag.time.max.ms` (Kafka `getOutOfSyncReplicas`)."""
        leo = self.log.log_end_offset
        out: set[int] = set()
        for replica in self._isr_state.isr:
            if replica == self.local_broker_id:
                continue
            st = self._replicas.get(replica, ReplicaState())
            if not st.is_caught_up(leo, now_ms, self.replica_lag_time_max_ms):
                out.add(replica)
        return frozenset(out)

    def maybe_shrink_isr(self, now_ms: int) -> AlterPartitionItem | None:
        """Propose removing lagging followers (Kafka `maybeShrinkIsr`, run periodically)."""
        self._tick(now_ms)
        if not self.is_leader or self._isr_state.is_inflight:
            return None
        out = self.out_of_sync_replicas(now_ms)
        if not out:
            return None
        self._isr_state = self._isr_state.shrinking(out)
        return self.pending_alter_partition()

    def pending_alter_partition(self) -> AlterPartitionItem | None:
        """The in-flight ISR change as an AlterPartition item (None when nothing is in flight)."""
        if not self._isr_state.is_inflight:
            return None
        new_isr = self._isr_state.proposed_isr()
        return AlterPartitionItem(
            topic=self.topic_partition.topic,
            partition=self.topic_partition.partition,
            topic_id=self.topic_id,
            leader_epoch=self._state.leader_epoch,
            partition_epoch=self._state.partition_epoch,
            new_isr=new_isr,
            broker_epochs=tuple(
                -1 if r == self.local_broker_id else self._replicas.get(r, ReplicaState()).broker_epoch for r in new_isr
            ),
        )

    def handle_alter_partition_response(
        self, item: AlterPartitionItem, error: ErrorCode, committed: PartitionState | None = None
    ) -> bool:
        """The controller's answer to `item` (Kafka `handleAlterPartitionUpdate`/`Error`).

        Success: the returned registration becomes the committed state (if not older than
        what is known). FENCED_LEADER_EPOCH / INVALID_UPDATE_VERSION / NEW_LEADER_ELECTED (a completed reassignment): this leader is behind the
        controller; the change stays pending, blocking further changes, until the image brings
        the new registration. Any other error (or no answer): back to the committed ISR so
        the next check proposes again. Returns True when the committed ISR changed.
        """
        if item.leader_epoch != self._state.leader_epoch or item.partition_epoch != self._state.partition_epoch:
            return False  # answered after a newer registration arrived
        if error == ErrorCode.none and committed is not None:
            if committed.leader_epoch != self._state.leader_epoch or committed.partition_epoch <= self._state.partition_epoch:
                self._isr_state = IsrState(self._state.isr)
                return False
            grew = len(committed.isr) > len(self._state.isr)
            shrank = len(committed.isr) < len(self._state.isr)
            self._state = PartitionState(
                self._state.leader, committed.leader_epoch, committed.partition_epoch, self._state.replicas, committed.isr
            )
            self._isr_state = IsrState(committed.isr)
            self.isr_expands += int(grew)
            self.isr_shrinks += int(shrank)
            self.maybe_increment_high_watermark()
            return True
        if error in (ErrorCode.fenced_leader_epoch, ErrorCode.invalid_update_version, ErrorCode.new_leader_elected):
            return False
        self._isr_state = IsrState(self._state.isr)
        return False

    def follower_lag_max(self, now_ms: int) -> tuple[int, int]:
        """(max offset lag, max time since caught up in ms) over this leader's followers."""
        leo = self.log.log_end_offset
        lag, lag_ms = 0, 0
        for st in self._replicas.values():
            lag = max(lag, leo - max(st.log_end_offset, 0))
            since = now_ms - st.last_caught_up_time_ms if st.last_caught_up_time_ms != NEVER_MS else now_ms
            lag_ms = max(lag_ms, 0 if st.log_end_offset == leo else since)
        return lag, lag_ms

