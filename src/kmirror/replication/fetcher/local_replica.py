"""The engine's `LocalReplica` port over the replica manager's follower partitions."""

from __future__ import annotations

import logging

from kmirror.protocol.errors import ErrorCode
from kmirror.replication.log_port import PartitionLog
from kmirror.replication.outcomes import PartitionError
from kmirror.replication.partition import Partition
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.types import TopicPartition

log = logging.getLogger(__name__)


class PartitionLogReads:
    """The engine's read side of the `LocalReplica` port: offsets and epochs of the partition
    `_partition(tp)` selects (0 / None when there is none). Follower replication and mirroring
    differ only in which partitions they select and how they write."""

    def _partition(self, tp: TopicPartition) -> Partition[PartitionLog] | None:
        raise NotImplementedError

    def log_end_offset(self, tp: TopicPartition) -> int:
        p = self._partition(tp)
        return 0 if p is None else p.log.log_end_offset

    def high_watermark(self, tp: TopicPartition) -> int:
        p = self._partition(tp)
        return 0 if p is None else p.log.high_watermark

    def log_start_offset(self, tp: TopicPartition) -> int:
        p = self._partition(tp)
        return 0 if p is None else p.log.log_start_offset

    def latest_epoch(self, tp: TopicPartition) -> int | None:
        p = self._partition(tp)
        return None if p is None else p.log.latest_epoch

    def end_offset_for_epoch(self, tp: TopicPartition, epoch: int) -> tuple[int, int] | None:
        p = self._partition(tp)
        return None if p is None else p.log.end_offset_for_epoch(epoch)


class ReplicaManagerLocalReplica(PartitionLogReads):
    """Writes go only to partitions this node still follows; a partition that became
    leader or left meanwhile answers NOT_LEADER_OR_FOLLOWER and is left untouched."""

    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.replica_manager = replica_manager

    def _partition(self, tp: TopicPartition) -> Partition[PartitionLog] | None:
        return self.replica_manager.get_partition(tp)

    def _follower(self, tp: TopicPartition) -> Partition[PartitionLog] | None:
        return self.replica_manager.follower_partition(tp)

    def truncate_to(self, tp: TopicPartition, offset: int) -> None:
        p = self._follower(tp)
        if p is not None:
            if offset < p.log.log_end_offset:  # Kafka's "Truncating to offset" line
                log.info("Truncating %s to offset %d (log end offset %d)", tp, offset, p.log.log_end_offset)
            p.truncate_to(offset)

    def truncate_fully_and_start_at(self, tp: TopicPartition, offset: int) -> None:
        p = self._follower(tp)
        if p is not None:
            p.truncate_fully_and_start_at(offset)

    def append(self, tp: TopicPartition, records: bytes | memoryview) -> ErrorCode:
        p = self._follower(tp)
        if p is None:
            return ErrorCode.not_leader_or_follower
        result = p.append_records_as_follower(records)
        if isinstance(result, PartitionError):
            return result.code
        self.replica_manager.notify_follower_progress(tp)
        return ErrorCode.none

    def update_high_watermark(self, tp: TopicPartition, high_watermark: int) -> None:
        p = self._follower(tp)
        if p is not None and p.update_follower_high_watermark(high_watermark):
            self.replica_manager.notify_follower_progress(tp)

    def maybe_increment_log_start_offset(self, tp: TopicPartition, offset: int) -> None:
        p = self._follower(tp)
        if p is not None and p.log.log_start_offset < offset <= p.log.high_watermark:
            p.log.maybe_increment_log_start_offset(offset)
