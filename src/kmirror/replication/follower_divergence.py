"""Where a follower's log leaves the leader's (KIP-101, KIP-279), a part of `Partition`.

A follower Fetch names the epoch of its last fetched batch. The leader answers with a
diverging epoch when that epoch ends below the fetch offset in its own cache, or is not an
epoch it knows at all; the follower truncates there and fetches again.

A leader whose epoch is not in its cache (a mirror topic keeps its source's epochs,
KIP-1279) cannot tell a follower's stale tail from its own log by epochs: each follower's
first Fetch above the leader's start offset is answered with a diverging epoch ending there
(`beyond_leader_start`).
"""

from __future__ import annotations

from kmirror.protocol.errors import ErrorCode
from kmirror.replication.epoch_assignment import beyond_leader_start
from kmirror.replication.log_port import PartitionLog
from kmirror.replication.outcomes import UNKNOWN_EPOCH, EpochEndOffset, PartitionError
from kmirror.replication.partition_state import PartitionState
from kmirror.replication.replica_state import ReplicaState
from kmirror.types import TopicPartition


class FollowerDivergence:
    # Provided by `Partition`.
    topic_partition: TopicPartition
    leader_epoch_start_offset: int | None
    _state: PartitionState
    _replicas: dict[int, ReplicaState]
    # Leader side: followers to see fetch at or below `leader_epoch_start_offset` first; none
    # when the epoch cache holds this leader's epoch.
    _unchecked_followers: set[int]

    @property
    def log(self) -> PartitionLog:
        raise NotImplementedError

    @property
    def is_leader(self) -> bool:
        raise NotImplementedError

    def check_leader_epoch(self, current_leader_epoch: int) -> PartitionError | None:
        raise NotImplementedError

    def follower_divergence(
        self, replica_id: int, fetch_offset: int, last_fetched_epoch: int, current_leader_epoch: int
    ) -> EpochEndOffset | PartitionError | None:
        """The epoch and end offset a follower truncates to before it fetches on; None when
        its log agrees with this leader's up to `fetch_offset`."""
        if last_fetched_epoch >= 0:
            end = self.last_offset_for_leader_epoch(current_leader_epoch, last_fetched_epoch, fetch_only_from_leader=False)
            if isinstance(end, PartitionError):
                return end
            if end.leader_epoch == UNKNOWN_EPOCH or end.end_offset < 0:
                return PartitionError(
                    ErrorCode.offset_out_of_range,
                    f"Could not determine the end offset of the last fetched epoch {last_fetched_epoch} of {self.topic_partition}",
                )
            if end.leader_epoch < last_fetched_epoch or end.end_offset < fetch_offset:
                return end
        if replica_id in self._unchecked_followers:
            diverging = beyond_leader_start(fetch_offset, last_fetched_epoch, self.leader_epoch_start_offset)
            if diverging is not None:
                return diverging
            self._unchecked_followers.discard(replica_id)
        return None

    def check_followers_from_log_end(self) -> None:
        """A Kafka leader never truncates; a mirror leader does. The start of its epoch cannot
        stay above the log it truncated, or its followers could never count as in sync nor
        ListOffsets answer anything but OFFSET_NOT_AVAILABLE. Its followers truncate to the
        new start as to a new leader's: what they hold above it may not be what the leader
        fetches there again."""
        start = self.leader_epoch_start_offset
        if start is not None and start > self.log.log_end_offset:
            self.leader_epoch_start_offset = self.log.log_end_offset
            self._unchecked_followers = set(self._replicas)

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
