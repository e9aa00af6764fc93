"""Writing transaction markers on this broker, the partition leader's side of WriteTxnMarkers
(Kafka `KafkaApis.handleWriteTxnMarkersRequest`).

Each marker becomes a one-record COMMIT/ABORT control batch carrying the producer id and
epoch and the coordinator epoch, appended with origin COORDINATOR and acks=all (the answer
waits until the ISR has it, so the LSO and the `.txnindex` move on every replica). A marker
on `__consumer_offsets` also settles the producer's pending transactional offset commits in
the group coordinator before it is acknowledged.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kmirror.broker.handlers.produce import await_high_watermark
from kmirror.broker.services import BrokerServices
from kmirror.protocol.errors import ErrorCode
from kmirror.records.control import ControlType, build_control_batch
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
    """Per marker, the error of each of its partitions (none when written and replicated)."""
    replica_manager = services.replica_manager
    group_coordinator = services.groups
    answers = []
    for marker in markers:
        now_ms = replica_manager.clock.now_ms()
        results: dict[TopicPartition, Any] = {}
        for tp in marker.partitions:
            batch = build_control_batch(ControlType.COMMIT if marker.commit else ControlType.ABORT,
                                        marker.producer_id, marker.producer_epoch, now_ms,
                                        coordinator_epoch=marker.coordinator_epoch)
            results[tp] = replica_manager.append_coordinator_batches(tp, batch)
        await await_high_watermark(replica_manager, results, MARKER_TIMEOUT_MS)
        errors: dict[TopicPartition, ErrorCode] = {}
        for tp, result in results.items():
            error = ErrorCode.none if isinstance(result, AppendOutcome) else result.code
            if error == ErrorCode.none and tp.topic == CONSUMER_OFFSETS and group_coordinator is not None:
                error = await group_coordinator.complete_transaction(
                    producer_id=marker.producer_id, committed=marker.commit, partition=tp.partition)
            errors[tp] = error
        answers.append(errors)
    return answers
