"""`ReplicatedCoordinatorLog`: a coordinator's `CoordinatorLog` whose appends are acknowledged
only once the partition's ISR has them (Kafka's coordinators append with acks=all: the group
coordinator's `CoordinatorPartitionWriter` and `TransactionStateManager.appendTransactionToLog`).

Without it an answer could name a write that only the leader holds: a kill -9 of that
leader right after, and the next leader (elected from the ISR) never had it. For
`__consumer_offsets` that loses an acknowledged OffsetCommit, or a TxnOffsetCommit whose
offsets the COMMIT marker should later make visible; for `__transaction_state` an
acknowledged PrepareCommit. The transaction markers the group coordinator writes on
`__consumer_offsets` (WriteTxnMarkers) wait for the ISR the same way. Below `min.insync.replicas` the append is refused
(NOT_ENOUGH_REPLICAS) before anything is written.
"""

from __future__ import annotations

from kmirror.broker.handlers.produce import await_high_watermark
from kmirror.broker.txn_markers import MARKER_TIMEOUT_MS
from kmirror.coordinator.offsets.log_adapter import CoordinatorAppendError, ReplicaManagerCoordinatorLog
from kmirror.log.producer_state import VerificationGuard
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.outcomes import AppendOutcome, PartitionError
from kmirror.types import TopicPartition

# Kafka's coordinators wait `offsets.commit.timeout.ms` / `request.timeout.ms` (30 s both).
COORDINATOR_APPEND_TIMEOUT_MS = MARKER_TIMEOUT_MS


class ReplicatedCoordinatorLog(ReplicaManagerCoordinatorLog):
    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]], *, producer_id: int = -1,
                     producer_epoch: int = -1, verification_guard: VerificationGuard | None = None) -> int:
        tp = TopicPartition(self.topic, partition)
        leader = self.replica_manager.get_partition(tp)
        if leader is not None and len(leader.isr) < leader.min_insync_replicas:
            raise CoordinatorAppendError(ErrorCode.not_enough_replicas)
        last_offset = await super().append(partition, records, producer_id=producer_id,
                                           producer_epoch=producer_epoch, verification_guard=verification_guard)
        await self._await_replicated(tp, last_offset)
        return last_offset

    async def append_end_transaction_marker(self, partition: int, *, producer_id: int, producer_epoch: int,
                                            coordinator_epoch: int, committed: bool) -> int:
        """A marker is written with acks=all too (Kafka's WriteTxnMarkers appends with
        requiredAcks -1): refused below `min.insync.replicas` by the partition itself."""
        offset = await super().append_end_transaction_marker(
            partition, producer_id=producer_id, producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch,
            committed=committed)
        await self._await_replicated(TopicPartition(self.topic, partition), offset)
        return offset

    async def _await_replicated(self, tp: TopicPartition, last_offset: int) -> None:
        results: dict[TopicPartition, AppendOutcome | PartitionError] = {
            tp: AppendOutcome(last_offset, last_offset, -1, -1)}
        await await_high_watermark(self.replica_manager, results, COORDINATOR_APPEND_TIMEOUT_MS)
        outcome = results[tp]
        if isinstance(outcome, PartitionError):
            raise CoordinatorAppendError(outcome.code)
