"""Writing transaction markers on this broker, the partition leader's side of WriteTxnMarkers
(Kafka `KafkaApis.handleWriteTxnMarkersRequest`).

Each marker becomes a one-record COMMIT/ABORT control batch carrying the producer id and
epoch and the coordinator epoch, appended with origin COORDINATOR and acks=all (the answer
waits until the ISR has it, so the LSO and the `.txnindex` move on every replica). A marker
on `__consumer_offsets` is written by the group coordinator's runtime instead
(`GroupCoordinatorService.complete_transaction`, Kafka `completeTransaction`), in turn with
the partition's other appends, and settles the producer's pending transactional offset
commits before it is acknowledged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kmirror.broker.handlers.produce import await_high_watermark
from kmirror.broker.services import BrokerServices
from kmirror.protocol.errors import ErrorCode
from kmirror.records.control import build_end_txn_marker
from kmirror.replication.outcomes import AppendOutcome
from kmirror.types import TopicPartition

CONSUMER_OFFSETS = "__consumer_offsets"
MARKER_TIMEOUT_MS = 30_000  # Kafka's marker requests use request.timeout.ms


@dataclass(frozen=True, slots=True)
class MarkerEntry:
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


async def write_txn_markers(services: BrokerServices,
                            markers: Iterable[MarkerEntry]) -> list[dict[TopicPartition, ErrorCode]]:
    """Per marker, the error of each of its partitions (none when written and replicated).
    The other partitions' markers are appended first; their ISR catches up meanwhile."""
    replica_manager = services.replica_manager
    answers = []
    for marker in markers:
        groups = services.group_coordinator
        coordinated = [tp for tp in marker.partitions if tp.topic == CONSUMER_OFFSETS and groups is not None]
        results = _append_markers(services, marker, [tp for tp in marker.partitions if tp not in coordinated])
        errors = {tp: await _complete_transaction(services, marker, tp) for tp in coordinated}
        await await_high_watermark(replica_manager, results, MARKER_TIMEOUT_MS)
        for tp, result in results.items():
            errors[tp] = ErrorCode.none if isinstance(result, AppendOutcome) else result.code
        answers.append({tp: errors[tp] for tp in marker.partitions})
    return answers


def _append_markers(services: BrokerServices, marker: MarkerEntry,
                    partitions: list[TopicPartition]) -> dict[TopicPartition, Any]:
    replica_manager = services.replica_manager
    now_ms = replica_manager.clock.now_ms()
    results: dict[TopicPartition, Any] = {}
    for tp in partitions:
        batch = build_end_txn_marker(marker.commit, marker.producer_id, marker.producer_epoch, now_ms,
                                     marker.coordinator_epoch)
        results[tp] = replica_manager.append_coordinator_batches(tp, batch)
    return results


async def _complete_transaction(services: BrokerServices, marker: MarkerEntry, tp: TopicPartition) -> ErrorCode:
    """The group coordinator writes the marker; the answers a transaction coordinator does
    not expect from a partition leader (the group coordinator not ready) become
    NOT_LEADER_OR_FOLLOWER, which it retries, as Kafka's `handleWriteTxnMarkersRequest` says."""
    error = await services.groups.complete_transaction(
        tp.partition, producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
        coordinator_epoch=marker.coordinator_epoch, committed=marker.commit)
    if error in (ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
                 ErrorCode.not_coordinator):
        return ErrorCode.not_leader_or_follower
    return error
