"""The transaction coordinator on `CoordinatorRuntime`: `__transaction_state` partitions load
as this node comes to lead them, the core's appends run in order, and its `TxnMarker`s are
delivered to the partition leaders (Kafka `TransactionMarkerChannelManager`) through the
`MarkerWriter` port, retried with backoff until each partition has its marker or the
marker is no longer wanted (the transaction moved on, or its partition left this node).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Protocol

from kmirror.coordinator.ports import CoordinatorLog
from kmirror.coordinator.results import Append, Output
from kmirror.coordinator.runtime import KeyValueCoordinatorRuntime
from kmirror.coordinator.transaction.config import TRANSACTION_STATE_TOPIC, TransactionConfig
from kmirror.coordinator.transaction.coordinator import TransactionCoordinator
from kmirror.coordinator.transaction.results import (
    DescribedTransaction,
    InitProducerIdResult,
    ListedTransaction,
    TxnMarker,
    TxnOutput,
)
from kmirror.kip1279.errors import MirrorError, kio_error_code
from kmirror.ports import Clock
from kmirror.protocol.client_regex import ClientRegex
from kmirror.protocol.errors import ErrorCode
from kmirror.types import TopicPartition

log = logging.getLogger("kmirror.coordinator.transaction")

# Kafka's marker channel retries every `retry.backoff.ms`-ish; ours backs off to 1 s.
MARKER_RETRY_INITIAL_MS = 50
MARKER_RETRY_MAX_MS = 1000
TOPIC_DELETED = -2


class ProducerIds(Protocol):
    async def reserve(self) -> ErrorCode: ...

    def next_producer_id(self) -> int: ...


# (leader node id, marker, its partitions on that leader) -> error per partition.
MarkerWriter = Callable[[int, TxnMarker, list[TopicPartition]], Awaitable[dict[TopicPartition, ErrorCode]]]
# (coordinator node id, transactional id, producer id, epoch, partitions) -> error per
# partition: AddPartitionsToTxn `verify_only` sent to another broker (KIP-890 part 1).
RemoteVerifier = Callable[[int, str, int, int, list[TopicPartition]], Awaitable[dict[TopicPartition, ErrorCode]]]
# The leader of a partition now: a node id, None while it has none, TOPIC_DELETED when the
# partition no longer exists (its marker is not owed any more).
LeaderLookup = Callable[[TopicPartition], int | None]

# Answers of a partition leader after which the marker is not written again.
# READ_ONLY_TOPIC: the partition became a mirror partition (a failback, or the topic added to a
# mirror) while the transaction was open. Its log was truncated to what the mirror's source
# holds, so the transaction's records there are gone, and a marker may not be written into it
# (docs/design/transactions.md, "A transaction open when its topic becomes a mirror topic").
_MARKER_FINAL = {ErrorCode.none: "written", ErrorCode.invalid_producer_epoch: "refused: a newer producer epoch",
                 ErrorCode.transaction_coordinator_fenced: "refused: a newer coordinator epoch",
                 kio_error_code(int(MirrorError.READ_ONLY_TOPIC)): "skipped: a mirror partition now"}


class TransactionCoordinatorService(KeyValueCoordinatorRuntime):
    def __init__(self, node_id: int, config: TransactionConfig, log: CoordinatorLog, clock: Clock, *,
                 producer_ids: ProducerIds, write_markers: MarkerWriter, leader_of: LeaderLookup,
                 coordinator_epoch_of: Callable[[int], int], verify_remote: RemoteVerifier | None = None) -> None:
        self.node_id = node_id
        self._verify_remote = verify_remote
        self.config = config
        self._producer_ids = producer_ids
        self._write_markers = write_markers
        self._leader_of = leader_of
        self._txn_core = TransactionCoordinator(config, clock, producer_ids.next_producer_id, coordinator_epoch_of)
        super().__init__(self._txn_core, log, clock, TRANSACTION_STATE_TOPIC)

    @property
    def txn_core(self) -> TransactionCoordinator:
        return self._txn_core

    def _replay(self, partition: int) -> tuple[int, Output[Append] | None]:
        return self._replay_key_value(partition, self._txn_core.complete_load)

    def partition_for(self, transactional_id: str) -> int:
        return self.txn_core.partition_for(transactional_id)

    def coordinator_error(self, transactional_id: str) -> ErrorCode | None:
        return self.txn_core.coordinator_error(transactional_id)

    # ---- requests --------------------------------------------------------------------

    async def init_producer_id(self, *, transactional_id: str, transaction_timeout_ms: int,
                               producer_id: int = -1, producer_epoch: int = -1) -> InitProducerIdResult:
        error = await self._producer_ids.reserve()
        if error != ErrorCode.none:
            return InitProducerIdResult(error)
        rid, future = self._new_waiter()
        out = self.txn_core.init_producer_id(rid, transactional_id=transactional_id,
                                             transaction_timeout_ms=transaction_timeout_ms,
                                             producer_id=producer_id, producer_epoch=producer_epoch)
        return await self._answer_as(InitProducerIdResult, rid, future, out)

    async def add_partitions(self, *, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> ErrorCode:
        rid, future = self._new_waiter()
        out = self.txn_core.add_partitions(rid, transactional_id=transactional_id, producer_id=producer_id,
                                           producer_epoch=producer_epoch, partitions=list(partitions))
        return await self._answer_as(ErrorCode, rid, future, out)

    async def end_txn(self, *, transactional_id: str, producer_id: int, producer_epoch: int,
                      committed: bool) -> ErrorCode:
        rid, future = self._new_waiter()
        out = self.txn_core.end_txn(rid, transactional_id=transactional_id, producer_id=producer_id,
                                    producer_epoch=producer_epoch, committed=committed)
        return await self._answer_as(ErrorCode, rid, future, out)

    async def verify_partitions(self, *, transactional_id: str, producer_id: int, producer_epoch: int,
                                partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """KIP-890 part 1, from a partition leader: asks the id's coordinator (this node, or
        another broker through `verify_remote`) whether `partitions` are in the producer's
        ongoing transaction. A coordinator that cannot answer yet answers its error; one
        that cannot be reached is NETWORK_EXCEPTION (Kafka `AddPartitionsToTxnManager`)."""
        core = self.txn_core
        node = self._leader_of(TopicPartition(TRANSACTION_STATE_TOPIC, core.partition_for(transactional_id)))
        if node == self.node_id or self._verify_remote is None:
            return core.verify_partitions(transactional_id=transactional_id, producer_id=producer_id,
                                          producer_epoch=producer_epoch, partitions=partitions)
        if node is None or node < 0:
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        try:
            return await self._verify_remote(node, transactional_id, producer_id, producer_epoch, partitions)
        except Exception as exc:  # the coordinator is unreachable: the producer retries
            log.info("verifying %s with broker %d failed: %s", transactional_id, node, exc)
            return dict.fromkeys(partitions, ErrorCode.network_exception)

    def verify_local(self, *, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn `verify_only` arriving at this node (NOT_COORDINATOR if it is not)."""
        return self.txn_core.verify_partitions(transactional_id=transactional_id, producer_id=producer_id,
                                               producer_epoch=producer_epoch, partitions=partitions)

    def describe(self, transactional_id: str) -> DescribedTransaction:
        return self.txn_core.describe(transactional_id)

    def list_transactions(self, state_filters: Iterable[str], producer_id_filters: Iterable[int],
                          duration_filter_ms: int = -1, transactional_id_pattern: ClientRegex | None = None,
                          ) -> tuple[tuple[ListedTransaction, ...], tuple[str, ...]]:
        return self.txn_core.list_transactions(state_filters, producer_id_filters, duration_filter_ms,
                                               transactional_id_pattern)

    # ---- markers ---------------------------------------------------------------------

    async def _execute(self, out: Output) -> None:
        await super()._execute(out)
        if isinstance(out, TxnOutput):
            for marker in out.markers:
                self._spawn(self._deliver(marker))

    async def _deliver(self, marker: TxnMarker) -> None:
        """Write `marker` on every leader of its partitions, retrying what fails."""
        core = self.txn_core
        delay_ms = MARKER_RETRY_INITIAL_MS
        remaining = set(marker.partitions)
        while self._running:
            remaining = {tp for tp in remaining if core.marker_wanted(marker, tp)}
            if not remaining:
                return
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in sorted(remaining, key=lambda t: (t.topic, t.partition)):
                leader = self._leader_of(tp)
                if leader == TOPIC_DELETED:
                    await self._execute(core.on_marker_written(marker, tp))
                elif leader is not None:
                    by_leader.setdefault(leader, []).append(tp)
            results = await asyncio.gather(*(self._write(leader, marker, tps) for leader, tps in by_leader.items()))
            for answers in results:
                for tp, error in answers.items():
                    outcome = _MARKER_FINAL.get(error)
                    if outcome is None:
                        continue  # not leader, not enough replicas, timeout...: retried
                    if error != ErrorCode.none:
                        log.warning("%s marker for %s on %s %s", "COMMIT" if marker.commit else "ABORT",
                                    marker.transactional_id, tp, outcome)
                    await self._execute(core.on_marker_written(marker, tp))
            if not any(core.marker_wanted(marker, tp) for tp in remaining):
                return
            await asyncio.sleep(delay_ms / 1000)
            delay_ms = min(delay_ms * 2, MARKER_RETRY_MAX_MS)

    async def _write(self, leader: int, marker: TxnMarker,
                     partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        try:
            return await self._write_markers(leader, marker, partitions)
        except Exception as exc:  # connection lost, broker gone: retried
            log.info("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            return {}
