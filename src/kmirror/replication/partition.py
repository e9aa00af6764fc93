"""One hosted partition: its log, its leadership and its high watermark (Kafka `Partition`).

Sans-IO. The partition knows the registration it was last given (leader, leader epoch,
partition epoch, replicas, ISR) and owns the high watermark rule. This issue hosts a single
replica per partition, so the leader's HW is its own LEO after every append; the rule is
written as "min over the ISR's log end offsets" with followers' fetch state kept in
`replica_log_end_offsets`, so follower fetch (next issue) only has to feed that map.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from kmirror.protocol.errors import ErrorCode
from kmirror.replication.log_port import PartitionLog, append_outcome, read_outcome
from kmirror.replication.outcomes import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NO_TIMESTAMP,
    READ_COMMITTED,
    AppendOutcome,
    EpochEndOffset,
    PartitionError,
    ReadOutcome,
    TimestampOffset,
)
from kmirror.types import TopicPartition

NO_LEADER = -1
# Sent by clients that do not know (or do not check) the leader epoch.
UNKNOWN_EPOCH = -1


@dataclass(frozen=True, slots=True)
class PartitionState:
    """The registration this node follows (from `PartitionRegistration` in the metadata image)."""

    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


class Partition:
    def __init__(
        self,
        topic_partition: TopicPartition,
        topic_id: UUID,
        log: PartitionLog,
        local_broker_id: int,
        state: PartitionState,
        min_insync_replicas: int = 1,
    ) -> None:
        self.topic_partition = topic_partition
        self.topic_id = topic_id
        self.log = log
        self.local_broker_id = local_broker_id
        self.min_insync_replicas = min_insync_replicas
        self._state = state
        # Followers' last fetched log end offsets (leader side); empty with one replica.
        self.replica_log_end_offsets: dict[int, int] = {}
        self.maybe_increment_high_watermark()

    # -- registration -------------------------------------------------------------------

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
    def is_leader(self) -> bool:
        return self._state.leader == self.local_broker_id

    def update_state(self, state: PartitionState) -> None:
        """Follow a new registration. Kafka's rule: an older leader epoch is ignored."""
        if state.leader_epoch < self._state.leader_epoch:
            return
        self._state = state
        self.replica_log_end_offsets = {
            r: leo for r, leo in self.replica_log_end_offsets.items() if r in state.replicas
        }
        if self.is_leader:
            self.maybe_increment_high_watermark()

    # -- high watermark -----------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the ISR (the leader's own LEO included); it never moves back."""
        if not self.is_leader:
            return False
        candidates = [self.log.log_end_offset]
        for replica in self._state.isr:
            if replica != self.local_broker_id:
                candidates.append(self.replica_log_end_offsets.get(replica, 0))
        new_hw = min(candidates)
        if new_hw > self.log.high_watermark:
            self.log.update_high_watermark(new_hw)
            return True
        return False

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

    def append_records_to_leader(
        self, records: bytes | memoryview, required_acks: int, now_ms: int
    ) -> AppendOutcome | PartitionError:
        if not self.is_leader:
            return PartitionError(ErrorCode.not_leader_or_follower)
        # Kafka `Partition.appendRecordsToLeader`: acks=all needs min.insync.replicas in the ISR.
        if required_acks == -1 and len(self._state.isr) < self.min_insync_replicas:
            return PartitionError(
                ErrorCode.not_enough_replicas,
                f"The size of the current ISR {len(self._state.isr)} is insufficient to satisfy "
                f"the min.isr requirement of {self.min_insync_replicas} for partition {self.topic_partition}",
            )
        result = append_outcome(self.log.append_as_leader(records, self._state.leader_epoch, now_ms=now_ms))
        if isinstance(result, AppendOutcome):
            self.maybe_increment_high_watermark()
        return result

    def append_records_as_follower(self, records: bytes | memoryview) -> Any:
        """Hook for replication and mirroring: offsets, epochs and bytes are kept as given."""
        return self.log.append_as_follower(records)

    # -- fetch --------------------------------------------------------------------------

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        isolation_level: int,
        current_leader_epoch: int,
        min_one_message: bool,
    ) -> ReadOutcome | PartitionError:
        """A consumer read (Kafka `Partition.fetchRecords` with `FetchIsolation` HW or TXN).

        Reads stop at the HW (read_uncommitted) or the LSO (read_committed). An offset
        between that bound and the LEO answers empty; below the log start or past the
        LEO is OFFSET_OUT_OF_RANGE. Follower reads (bound = LEO) come with replication.
        """
        error = self._leader_check(current_leader_epoch)
        if error is not None:
            return error
        log = self.log
        log_start, log_end = log.log_start_offset, log.log_end_offset
        high_watermark = log.high_watermark
        last_stable = log.last_stable_offset
        if fetch_offset < log_start or fetch_offset > log_end:
            return PartitionError(
                ErrorCode.offset_out_of_range,
                f"Offset {fetch_offset} is out of range [{log_start}, {log_end}] for {self.topic_partition}",
            )
        max_offset = last_stable if isolation_level == READ_COMMITTED else high_watermark
        if fetch_offset >= max_offset:
            data: bytes | memoryview = b""
        else:
            read = read_outcome(log.read(fetch_offset, max_bytes, max_offset, min_one_message))
            if isinstance(read, PartitionError):
                return read
            data = read
        return ReadOutcome(
            records=data,
            high_watermark=high_watermark,
            last_stable_offset=last_stable,
            log_start_offset=log_start,
            log_end_offset=log_end,
        )

    # -- list offsets -------------------------------------------------------------------

    def fetch_offset_for_timestamp(
        self, timestamp: int, isolation_level: int, current_leader_epoch: int
    ) -> TimestampOffset | None | PartitionError:
        """Kafka `Partition.fetchOffsetForTimestamp` for consumers; None = no such offset."""
        error = self._leader_check(current_leader_epoch)
        if error is not None:
            return error
        log = self.log
        last_fetchable = log.last_stable_offset if isolation_level == READ_COMMITTED else log.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            # Kafka answers LATEST with the current leader epoch.
            return TimestampOffset(NO_TIMESTAMP, last_fetchable, self._state.leader_epoch)
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            start = log.log_start_offset
            return TimestampOffset(NO_TIMESTAMP, start, self._epoch_at(start))
        if timestamp == LATEST_TIERED_TIMESTAMP:
            # No tiered storage: Kafka answers log start - 1 with no epoch (KIP-1005).
            return TimestampOffset(NO_TIMESTAMP, log.log_start_offset - 1, UNKNOWN_EPOCH)
        found = log.fetch_offset_by_timestamp(timestamp)
        if found is None:
            return None
        ts, offset, epoch = _timestamp_offset_fields(found)
        if timestamp != MAX_TIMESTAMP and offset >= last_fetchable:
            return None
        return TimestampOffset(ts, offset, epoch)

    def _epoch_at(self, offset: int) -> int:
        epoch = self.log.epoch_for_offset(offset)
        return UNKNOWN_EPOCH if epoch is None else epoch

    # -- leader epochs ------------------------------------------------------------------

    def last_offset_for_leader_epoch(
        self, current_leader_epoch: int, leader_epoch: int, fetch_only_from_leader: bool = True
    ) -> EpochEndOffset | PartitionError:
        """Kafka `Partition.lastOffsetForLeaderEpoch`: the largest epoch <= `leader_epoch` and
        its end offset; (-1, -1) when there is none (UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET)."""
        fenced = self.check_leader_epoch(current_leader_epoch)
        if fenced is not None:
            return fenced
        if fetch_only_from_leader and not self.is_leader:
            return PartitionError(ErrorCode.not_leader_or_follower)
        found = self.log.end_offset_for_epoch(leader_epoch)
        if found is None:
            return EpochEndOffset(UNKNOWN_EPOCH, -1)
        epoch, end_offset = found
        return EpochEndOffset(epoch, end_offset)

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


def _timestamp_offset_fields(found: Any) -> tuple[int, int, int]:
    epoch = getattr(found, "leader_epoch", None)
    return int(found.timestamp), int(found.offset), UNKNOWN_EPOCH if epoch is None else int(epoch)


def partition_state_from(registration: Any) -> PartitionState:
    """Read a metadata `PartitionRegistration` into the state a partition follows."""
    return PartitionState(
        leader=int(registration.leader),
        leader_epoch=int(registration.leader_epoch),
        partition_epoch=int(registration.partition_epoch),
        replicas=tuple(int(r) for r in registration.replicas),
        isr=tuple(int(r) for r in registration.isr),
    )


def hosted_here(registration: Any, node_id: int) -> bool:
    replicas: Iterable[int] = registration.replicas
    return node_id in replicas
