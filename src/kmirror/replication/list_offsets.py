"""The leader's answer to ListOffsets (Kafka `Partition.fetchOffsetForTimestamp`), a part of
`Partition`.

Consumers see offsets up to the high watermark (read_uncommitted) or the last stable offset
(read_committed); a follower asking for itself (`from_replica`) up to the log end offset.
A new leader whose high watermark has not reached the start of its epoch yet answers
OFFSET_NOT_AVAILABLE instead of an offset it may still lose.
"""

from __future__ import annotations

from kmirror.protocol.errors import ErrorCode
from kmirror.replication.log_port import PartitionLog
from kmirror.replication.outcomes import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    NO_TIMESTAMP,
    READ_COMMITTED,
    UNKNOWN_EPOCH,
    PartitionError,
    TimestampOffset,
)
from kmirror.replication.partition_state import PartitionState
from kmirror.types import TopicPartition


class ListOffsets:
    # Provided by `Partition`.
    topic_partition: TopicPartition
    leader_epoch_start_offset: int | None
    _state: PartitionState

    @property
    def log(self) -> PartitionLog:
        raise NotImplementedError

    def _leader_check(self, current_leader_epoch: int) -> PartitionError | None:
        raise NotImplementedError

    def fetch_offset_for_timestamp(
        self, timestamp: int, isolation_level: int, current_leader_epoch: int, from_replica: bool = False
    ) -> TimestampOffset | None | PartitionError:
        """Kafka `Partition.fetchOffsetForTimestamp`; None = no such offset. Consumers see up
        to the HW (or LSO); a follower (`from_replica`) up to the LEO."""
        error = self._leader_check(current_leader_epoch)
        if error is not None:
            return error
        log = self.log
        if from_replica:
            last_fetchable = log.log_end_offset
        else:
            last_fetchable = log.last_stable_offset if isolation_level == READ_COMMITTED else log.high_watermark
        # A new leader whose HW has not reached the start of its epoch yet cannot answer clients
        # LATEST, nor a lookup that finds nothing below the HW (Kafka: OFFSET_NOT_AVAILABLE).
        start = self.leader_epoch_start_offset
        lagging = not from_replica and start is not None and start > log.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            if lagging:
                return self._lagging_error()
            # Kafka answers LATEST with the current leader epoch.
            return TimestampOffset(NO_TIMESTAMP, last_fetchable, self._state.leader_epoch)
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            start = log.log_start_offset
            return TimestampOffset(NO_TIMESTAMP, start, self._epoch_at(start))
        if timestamp == LATEST_TIERED_TIMESTAMP:
            # No tiered storage: Kafka answers log start - 1 with no epoch (KIP-1005).
            return TimestampOffset(NO_TIMESTAMP, log.log_start_offset - 1, UNKNOWN_EPOCH)
        found = log.fetch_offset_by_timestamp(timestamp)
        if found is not None and found.offset < last_fetchable:  # MAX_TIMESTAMP too: nothing above the HW is exposed
            return TimestampOffset(found.timestamp, found.offset, found.leader_epoch)
        return self._lagging_error() if lagging else None

    def _lagging_error(self) -> PartitionError:
        return PartitionError(
            ErrorCode.offset_not_available,
            f"Failed to fetch offsets for partition {self.topic_partition} with leader epoch "
            f"{self._state.leader_epoch} as this partition's high watermark ({self.log.high_watermark}) is lagging "
            f"behind the start offset from the beginning of this epoch ({self.leader_epoch_start_offset}).",
        )

    def _epoch_at(self, offset: int) -> int:
        epoch = self.log.epoch_for_offset(offset)
        return UNKNOWN_EPOCH if epoch is None else epoch
