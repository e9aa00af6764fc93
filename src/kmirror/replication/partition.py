"""One hosted partition: its log, its role and the replication rules (Kafka `Partition`).

Sans-IO: every method that depends on time takes `now_ms`. The partition follows the
registration it was last given (leader, leader epoch, partition epoch, replicas, ISR).

As leader (Kafka's replication design: ISR, high watermark, KIP-101 leader epochs): it tracks each follower's fetch state (`ReplicaState`), computes
the high watermark as the minimum log end offset over the maximal ISR (plus followers that
are caught up but not yet in it), never moving it back, and proposes ISR changes
(`AlterPartitionItem`) that take effect only once the controller commits them (`IsrState`).
As follower: it refuses produce and leader-only reads (NOT_LEADER_OR_FOLLOWER), appends what
the fetcher brings with the leader's offsets and epochs, truncates where the fetcher says,
and takes the leader's high watermark, bounded by its own log end offset.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar
from uuid import UUID

from kmirror.log.append_analysis import AppendOrigin
from kmirror.log.outcomes import AppendError
from kmirror.log.producer_state import VerificationGuard
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.epoch_assignment import below_log_epochs
from kmirror.replication.follower_divergence import FollowerDivergence
from kmirror.replication.isr_changes import IsrChanges
from kmirror.replication.isr_state import IsrState
from kmirror.replication.list_offsets import ListOffsets
from kmirror.replication.log_port import (
    PartitionLog,
    append_outcome,
    fetched_upper_bound_offset,
    read_outcome,
)
from kmirror.replication.outcomes import (
    READ_COMMITTED,
    UNKNOWN_EPOCH,
    AppendOutcome,
    PartitionError,
    ReadOutcome,
    storage_guarded,
)
from kmirror.replication.partition_state import PartitionState, RoleChange, hosted_here, partition_state_from
from kmirror.replication.replica_state import ReplicaState
from kmirror.types import TopicPartition

__all__ = ["Partition", "PartitionState", "RoleChange", "hosted_here", "partition_state_from"]

NO_LEADER = -1
DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000

LogT = TypeVar("LogT", bound=PartitionLog, covariant=True)
"""The log a partition holds: it uses only `PartitionLog`, its host may know more of it."""


class Partition(IsrChanges, ListOffsets, FollowerDivergence, Generic[LogT]):
    def __init__(
        self,
        topic_partition: TopicPartition,
        topic_id: UUID,
        log: LogT,
        local_broker_id: int,
        state: PartitionState,
        min_insync_replicas: int = 1,
        replica_lag_time_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS,
        isr_eligible: Callable[[int, int], bool] = lambda _broker_id, _broker_epoch: True,
    ) -> None:
        """No I/O: the role is set in memory; `update_state` (which the replica manager calls
        right after) records a new leader epoch's start offset in the epoch cache."""
        self.topic_partition = topic_partition
        self.topic_id = topic_id
        self._log = log
        self.local_broker_id = local_broker_id
        self.min_insync_replicas = min_insync_replicas
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.isr_eligible = isr_eligible
        self._state = state
        self._isr_state = IsrState(state.isr)
        self._leader_role = state.leader == local_broker_id
        self._now_ms = 0
        # Leader side: each follower's fetch state.
        self._replicas: dict[int, ReplicaState] = (
            {r: ReplicaState() for r in state.replicas if r != local_broker_id} if self._leader_role else {}
        )
        # The LEO at which this leader's epoch started (None as follower).
        self.leader_epoch_start_offset: int | None = log.log_end_offset if self._leader_role else None
        self._role_applied = False  # update_state has run at least once
        # A mirror destination's log keeps the source's leader epochs (KIP-1279): its own
        # leader epoch is not an epoch of its records, and assigning it on becoming leader
        # would cut mirrored epochs from the cache (or announce an epoch the source never
        # wrote). The replica manager clears this while the topic is attached to a mirror.
        self.assigns_leader_epoch = True
        # Leader side: followers whose logs are checked against this leader's start first
        # (`FollowerDivergence`).
        self._unchecked_followers: set[int] = set()
        self.isr_shrinks = 0
        self.isr_expands = 0

    # -- registration -------------------------------------------------------------------

    @property
    def log(self) -> LogT:
        return self._log

    def replace_log(self, log: LogT) -> None:  # type: ignore[misc]  # a log of the same type
        """The same records in another log dir serve the partition from now on (a log moved
        by AlterReplicaLogDirs)."""
        self._log = log

    @property
    def state(self) -> PartitionState:
        return self._state

    @property
    def leader_epoch(self) -> int:
        return self._state.leader_epoch

    @property
    def partition_epoch(self) -> int:
        return self._state.partition_epoch

    @property
    def leader_id(self) -> int:
        return self._state.leader

    @property
    def replicas(self) -> tuple[int, ...]:
        return self._state.replicas

    @property
    def isr(self) -> tuple[int, ...]:
        return self._state.isr

    @property
    def isr_state(self) -> IsrState:
        return self._isr_state

    @property
    def maximal_isr(self) -> frozenset[int]:
        return self._isr_state.maximal_isr

    @property
    def is_leader(self) -> bool:
        return self._state.leader == self.local_broker_id

    @property
    def replica_log_end_offsets(self) -> dict[int, int]:
        """Followers' last fetched log end offsets (leader side; -1 = unknown)."""
        return {r: s.log_end_offset for r, s in self._replicas.items()}

    def replica_state(self, replica_id: int) -> ReplicaState | None:
        return self._replicas.get(replica_id)

    def update_state(self, state: PartitionState, now_ms: int | None = None) -> RoleChange:
        """Follow a registration (Kafka `makeLeader` / `makeFollower`).

        Stale registrations are ignored: a lower leader epoch, or the same leader epoch with
        a lower partition epoch. A new leader epoch as leader records the epoch's start at
        the LEO in the epoch cache (`leader-epoch-checkpoint`) and resets followers' state.
        """
        if now_ms is not None:
            self._now_ms = now_ms
        now = self._now_ms
        old = self._state
        if state.leader_epoch < old.leader_epoch or (
            state.leader_epoch == old.leader_epoch and state.partition_epoch < old.partition_epoch
        ):
            return RoleChange()
        first = not self._role_applied
        new_epoch = state.leader_epoch > old.leader_epoch
        was_leader = self._role_applied and self._leader_role
        self._role_applied = True
        self._state = state
        if not new_epoch and state.partition_epoch == old.partition_epoch and self._isr_state.is_inflight:
            isr_changed = False  # the same registration again: a change is still in flight
        else:
            isr_changed = state.isr != old.isr
            self._isr_state = IsrState(state.isr)
        if state.leader == self.local_broker_id:
            self._leader_role = True
            if new_epoch or not was_leader:
                leo = self.log.log_end_offset
                assigned = self.assigns_leader_epoch and not below_log_epochs(self.log, state.leader_epoch)
                if assigned:
                    self.log.assign_epoch_start_offset(state.leader_epoch, leo)
                self.leader_epoch_start_offset = leo
                self._unchecked_followers = set() if assigned else set(state.replicas) - {self.local_broker_id}
                self._replicas = {
                    r: self._replicas.get(r, ReplicaState()).reset(now, leo, not was_leader, r in state.isr)
                    for r in state.replicas
                    if r != self.local_broker_id
                }
            else:
                self._replicas = {
                    r: self._replicas.get(r, ReplicaState()) for r in state.replicas if r != self.local_broker_id
                }
            self.maybe_increment_high_watermark(now)
            return RoleChange(became_leader=not was_leader, isr_changed=isr_changed)
        self._leader_role = False
        self._replicas = {}
        self.leader_epoch_start_offset = None
        follow = first or new_epoch or was_leader or state.leader != old.leader
        return RoleChange(follow_leader=follow and state.leader >= 0, isr_changed=isr_changed)

    # -- high watermark -----------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def maybe_increment_high_watermark(self, now_ms: int | None = None) -> bool:
        """Kafka `maybeIncrementLeaderHW`: HW = min LEO over the maximal ISR (the committed ISR
        plus a follower whose addition is in flight); never moves back. A follower outside the
        ISR never holds the HW back: a dead one would stall acks=all forever."""
        if not self.is_leader:
            return False
        self._tick(now_ms)
        maximal = self._isr_state.maximal_isr
        new_hw = self.log.log_end_offset
        for replica, st in self._replicas.items():
            if replica in maximal and st.log_end_offset < new_hw:
                new_hw = st.log_end_offset
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            return True
        return False

    def _tick(self, now_ms: int | None) -> int:
        if now_ms is not None:
            self._now_ms = now_ms
        return self._now_ms

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """Kafka `checkEnoughReplicasReachOffset` (DelayedProduce, acks=all): done once the HW
        passes `required_offset`; NOT_ENOUGH_REPLICAS_AFTER_APPEND if by then the maximal ISR
        is below `min.insync.replicas`; NOT_LEADER_OR_FOLLOWER if leadership moved."""
        if not self.is_leader:
            return True, ErrorCode.not_leader_or_follower
        if self.log.high_watermark >= required_offset:
            if len(self._isr_state.maximal_isr) >= self.min_insync_replicas:
                return True, ErrorCode.none
            return True, ErrorCode.not_enough_replicas_after_append
        return False, ErrorCode.none

    # -- fencing ------------------------------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int) -> PartitionError | None:
        """Kafka's rule for a request's `current_leader_epoch` (KIP-320)."""
        if current_leader_epoch == UNKNOWN_EPOCH:
            return None
        if current_leader_epoch < self._state.leader_epoch:
            return PartitionError(ErrorCode.fenced_leader_epoch)
        if current_leader_epoch > self._state.leader_epoch:
            return PartitionError(ErrorCode.unknown_leader_epoch)
        return None

    def _leader_check(self, current_leader_epoch: int) -> PartitionError | None:
        fenced = self.check_leader_epoch(current_leader_epoch)
        if fenced is not None:
            return fenced
        if not self.is_leader:
            return PartitionError(ErrorCode.not_leader_or_follower)
        return None

    # -- produce ------------------------------------------------------------------------

    def maybe_start_transaction_verification(self, producer_id: int, sequence: int, epoch: int,
                                             now_ms: int) -> VerificationGuard | PartitionError:
        """Kafka `Partition.maybeStartTransactionVerification` (KIP-890 part 1), on the leader:
        the guard the verified append must carry (`Log.maybe_start_transaction_verification`)."""
        if not self.is_leader:
            return PartitionError(ErrorCode.not_leader_or_follower)
        guard = self.log.maybe_start_transaction_verification(producer_id, sequence, epoch, now_ms)
        if isinstance(guard, AppendError):
            return PartitionError(guard.error_code, guard.message)
        return guard

    @storage_guarded
    def append_records_to_leader(
        self, records: bytes | memoryview, required_acks: int, now_ms: int,
        verification_guard: VerificationGuard | None = None,
    ) -> AppendOutcome | PartitionError:
        """`verification_guard`: see `Log.append_as_leader` (None: transactions not verified)."""
        if not self.is_leader:
            return PartitionError(ErrorCode.not_leader_or_follower)
        # Kafka `Partition.appendRecordsToLeader`: acks=all needs min.insync.replicas in the ISR.
        if required_acks == -1 and len(self._state.isr) < self.min_insync_replicas:
            return PartitionError(
                ErrorCode.not_enough_replicas,
                f"The size of the current ISR {len(self._state.isr)} is insufficient to satisfy "
                f"the min.isr requirement of {self.min_insync_replicas} for partition {self.topic_partition}",
            )
        result = append_outcome(self.log.append_as_leader(records, self._state.leader_epoch, now_ms=now_ms,
                                                          verification_guard=verification_guard))
        if isinstance(result, AppendOutcome):
            self.maybe_increment_high_watermark()
        return result

    @storage_guarded
    def append_coordinator_batches_to_leader(self, records: bytes | memoryview, now_ms: int,
                                             verification_guard: VerificationGuard | None = None
                                             ) -> AppendOutcome | PartitionError:
        """Batches the broker writes for a coordinator, kept as built (origin COORDINATOR, Kafka
        `AppendOrigin.COORDINATOR`): transaction markers (WriteTxnMarkers) and transactional
        offset commits, the latter under their `verification_guard` (`Log.append_as_leader`).
        Refused below `min.insync.replicas`; the caller awaits the HW."""
        if not self.is_leader:
            return PartitionError(ErrorCode.not_leader_or_follower)
        if len(self._state.isr) < self.min_insync_replicas:
            return PartitionError(ErrorCode.not_enough_replicas)
        result = append_outcome(self.log.append_as_leader(records, self._state.leader_epoch, now_ms=now_ms,
                                                          origin=AppendOrigin.COORDINATOR,
                                                          verification_guard=verification_guard))
        if isinstance(result, AppendOutcome):
            self.maybe_increment_high_watermark()
        return result

    @storage_guarded
    def append_records_as_follower(self, records: bytes | memoryview) -> AppendOutcome | PartitionError:
        """Replication and mirroring: offsets, epochs and bytes are kept as given."""
        return append_outcome(self.log.append_as_follower(records))

    # -- follower side ------------------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove everything at and after `offset` (follower truncation, KIP-101; a KIP-1279
        mirror leader's truncation towards its source)."""
        truncated = bool(self.log.truncate_to(offset))
        self.check_followers_from_log_end()
        return truncated

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.log.truncate_fully_and_start_at(offset)
        self.check_followers_from_log_end()

    def update_follower_high_watermark(self, leader_high_watermark: int) -> bool:
        """A follower takes the leader's HW, bounded by its own LEO (Kafka
        `maybeUpdateHighWatermark`); True when it moved."""
        if self.is_leader:
            return False
        new_hw = min(leader_high_watermark, self.log.log_end_offset)
        if new_hw == self.log.high_watermark:
            return False
        self.log.update_high_watermark(new_hw)
        return True

    # -- fetch --------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation_level: int,
        current_leader_epoch: int,
        min_one_message: bool,
        fetch_only_from_leader: bool = True,
    ) -> ReadOutcome | PartitionError:
        """A consumer read (Kafka `Partition.fetchRecords` with `FetchIsolation` HW or TXN).

        Reads stop at the HW (read_uncommitted) or the LSO (read_committed). An offset
        between that bound and the LEO answers empty; below the log start or past the
        LEO is OFFSET_OUT_OF_RANGE. With `fetch_only_from_leader` False (consumers with
        client metadata, Fetch v11+, KIP-392) a follower serves up to its own HW.
        """
        fenced = self.check_leader_epoch(current_leader_epoch)
        if fenced is not None:
            return fenced
        if fetch_only_from_leader and not self.is_leader:
            return PartitionError(ErrorCode.not_leader_or_follower)
        log = self.log
        log_start, log_end = log.log_start_offset, log.log_end_offset
        high_watermark = log.high_watermark
        last_stable = log.last_stable_offset
        if fetch_offset < log_start or fetch_offset > log_end:
            return _out_of_range(self.topic_partition, fetch_offset, log_start, log_end)
        max_offset = last_stable if isolation_level == READ_COMMITTED else high_watermark
        data = self._read_log(fetch_offset, max_bytes, max_offset, min_one_message)
        if isinstance(data, PartitionError):
            return data
        aborted: tuple[tuple[int, int], ...] = ()
        if isolation_level == READ_COMMITTED and len(data):
            # Kafka `LocalLog.addAbortedTransactions`: a read_committed consumer drops the
            # records of these transactions from the fetched batches.
            aborted = tuple((t.producer_id, t.first_offset) for t in self.log.collect_aborted_transactions(
                fetch_offset, fetched_upper_bound_offset(data, fetch_offset)))
        return ReadOutcome(data, high_watermark, last_stable, log_start, log_end, aborted)

    @storage_guarded
    def _read_log(self, fetch_offset: int, max_bytes: int, max_offset: int, min_one: bool) -> bytes | memoryview | PartitionError:
        if fetch_offset >= max_offset:
            return b""
        return read_outcome(self.log.read(fetch_offset, max_bytes, max_offset, min_one))

    def fetch_for_follower(
        self,
        replica_id: int,
        fetch_offset: int,
        last_fetched_epoch: int,
        current_leader_epoch: int,
        max_bytes: int,
        min_one_message: bool,
        now_ms: int,
        follower_log_start_offset: int = -1,
        broker_epoch: int = -1,
    ) -> ReadOutcome | PartitionError:
        """The leader's answer to a follower Fetch (Kafka `fetchRecords` + `readRecords`).

        `last_fetched_epoch` (v12+, -1 = absent) is checked first: if the leader's end
        offset for that epoch is below `fetch_offset`, or the largest epoch it knows at or
        below it is a different epoch, the answer is `diverging_epoch` and no data, and the
        follower truncates (KIP-101 and KIP-279, epoch-based truncation). Otherwise the data goes up
        to the LEO, the follower's fetch offset becomes its known LEO, the HW may advance and
        the follower may join the ISR (`pending_alter_partition` then holds the proposal).
        """
        now = self._tick(now_ms)
        fenced = self.check_leader_epoch(current_leader_epoch)
        if fenced is not None:
            return fenced
        if not self.is_leader:
            return PartitionError(ErrorCode.not_leader_or_follower)
        if replica_id not in self._replicas:
            return PartitionError(ErrorCode.not_leader_or_follower, f"Replica {replica_id} is not a follower of {self.topic_partition}")
        log = self.log
        diverging = self.follower_divergence(replica_id, fetch_offset, last_fetched_epoch, current_leader_epoch)
        if isinstance(diverging, PartitionError):
            return diverging
        if diverging is not None:
            return ReadOutcome(b"", log.high_watermark, log.last_stable_offset, log.log_start_offset,
                               log.log_end_offset, diverging_epoch=diverging)
        log_start, log_end = log.log_start_offset, log.log_end_offset
        if fetch_offset < log_start or fetch_offset > log_end:
            return _out_of_range(self.topic_partition, fetch_offset, log_start, log_end)
        data = self._read_log(fetch_offset, max_bytes, log_end, min_one_message)
        if isinstance(data, PartitionError):
            return data
        self._replicas[replica_id] = self._replicas[replica_id].update_fetch_state(
            fetch_offset, follower_log_start_offset, now, log_end, broker_epoch
        )
        self.maybe_increment_high_watermark(now)
        self.maybe_expand_isr(replica_id, now)
        return ReadOutcome(data, log.high_watermark, log.last_stable_offset, log_start, log.log_end_offset)

    # -- delete records -----------------------------------------------------------------

    def delete_records_on_leader(self, offset: int) -> int | PartitionError:
        """Kafka `Partition.deleteRecordsOnLeader`: -1 means the HW; past the HW is
        OFFSET_OUT_OF_RANGE. Returns the new low watermark (the log start offset)."""
        if not self.is_leader:
            return PartitionError(ErrorCode.not_leader_or_follower)
        high_watermark = self.log.high_watermark
        target = high_watermark if offset == -1 else offset
        if target < 0 or target > high_watermark:
            return PartitionError(
                ErrorCode.offset_out_of_range,
                f"Cannot increment the log start offset to {target} of partition "
                f"{self.topic_partition} since it is larger than the high watermark {high_watermark}",
            )
        self.log.maybe_increment_log_start_offset(target)
        return self.log.log_start_offset


def _out_of_range(tp: TopicPartition, offset: int, log_start: int, log_end: int) -> PartitionError:
    return PartitionError(
        ErrorCode.offset_out_of_range, f"Offset {offset} is out of range [{log_start}, {log_end}] for {tp}"
    )

