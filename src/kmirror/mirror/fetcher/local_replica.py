"""The engine's `LocalReplica` port over the destination's mirror LEADER partitions.

Follower replication writes to follower partitions; a mirror fetcher writes to partitions
this broker leads (KIP-1279: the destination partition leader runs the mirror fetcher).
Only partitions the mirror manager registered (`admit`) are written; any other answers
NOT_LEADER_OR_FOLLOWER and stays untouched.

Contracts:
- batches are appended with `Partition.append_records_as_follower`: offsets, bytes and
  partition leader epochs as the source wrote them, compression untouched; a trailing
  partial batch of a Fetch answer is dropped by the log and fetched again;
- the source's high watermark is recorded for lag reporting, never applied: the
  destination leader's HW follows its own ISR (`maybe_increment_high_watermark`);
- the source's log start offset is followed up to the local HW (DeleteRecords and
  retention at the source move the mirror's log start the same way);
- an append the log rejects as malformed (corrupt CRC, bad offsets, not a v2 batch) is
  reported once through `on_failed(tp, message)`: the manager moves only that partition
  to FAILED (KIP "FAILED: a corrupt record or an unrecoverable error").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kmirror.protocol.errors import ErrorCode
from kmirror.replication.fetcher.local_replica import PartitionLogReads
from kmirror.replication.log_port import PartitionLog
from kmirror.replication.outcomes import PartitionError
from kmirror.replication.partition import Partition
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.types import TopicPartition

# Append refusals that are the data's fault: retrying the same bytes cannot succeed.
MALFORMED_DATA_ERRORS: frozenset[ErrorCode] = frozenset({
    ErrorCode.corrupt_message,
    ErrorCode.invalid_record,
    ErrorCode.unsupported_compression_type,
    ErrorCode.unknown_server_error,  # offsets below the log end: the source rewrote history
})


@dataclass(slots=True)
class SourceProgress:
    """What the last Fetch answer said about the source partition."""

    high_watermark: int = -1
    log_start_offset: int = -1


class MirrorLocalReplica(PartitionLogReads):
    def __init__(
        self, replica_manager: ReplicaManager, on_failed: Callable[[TopicPartition, str], None] | None = None
    ) -> None:
        self.replica_manager = replica_manager
        self.on_failed = on_failed
        self.admitted: set[TopicPartition] = set()
        self.source: dict[TopicPartition, SourceProgress] = {}

    def admit(self, tp: TopicPartition) -> None:
        self.admitted.add(tp)
        self.source.setdefault(tp, SourceProgress())

    def release(self, tp: TopicPartition) -> None:
        self.admitted.discard(tp)

    def _partition(self, tp: TopicPartition) -> Partition[PartitionLog] | None:
        return self.replica_manager.get_partition(tp)

    def _leader(self, tp: TopicPartition) -> Partition[PartitionLog] | None:
        p = self._partition(tp)
        return p if p is not None and p.is_leader and tp in self.admitted else None

    def truncate_to(self, tp: TopicPartition, offset: int) -> None:
        p = self._leader(tp)
        if p is not None:
            p.truncate_to(offset)

    def truncate_fully_and_start_at(self, tp: TopicPartition, offset: int) -> None:
        p = self._leader(tp)
        if p is not None:
            p.truncate_fully_and_start_at(offset)
            p.log.update_high_watermark(offset)

    def append(self, tp: TopicPartition, records: bytes | memoryview) -> ErrorCode:
        p = self._leader(tp)
        if p is None:
            return ErrorCode.not_leader_or_follower
        result = p.append_records_as_follower(records)
        if isinstance(result, PartitionError):
            if result.code in MALFORMED_DATA_ERRORS and self.on_failed is not None:
                self.on_failed(tp, f"{result.code.name.upper()}: {result.message}")
            return result.code
        p.maybe_increment_high_watermark()
        self.replica_manager.notify_follower_progress(tp)
        return ErrorCode.none

    def update_high_watermark(self, tp: TopicPartition, high_watermark: int) -> None:
        self.source.setdefault(tp, SourceProgress()).high_watermark = high_watermark

    def maybe_increment_log_start_offset(self, tp: TopicPartition, offset: int) -> None:
        self.source.setdefault(tp, SourceProgress()).log_start_offset = offset
        p = self._leader(tp)
        if p is not None and p.log.log_start_offset < offset <= p.log.high_watermark:
            p.log.maybe_increment_log_start_offset(offset)
