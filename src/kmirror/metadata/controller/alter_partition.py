"""AlterPartition on the controller: a leader's ISR change request (Kafka
`ReplicationControlManager.alterPartition`), validated in Kafka's order:

1. the requesting broker's epoch must be its registered one (STALE_BROKER_EPOCH, whole request);
2. unknown topic id -> UNKNOWN_TOPIC_ID, unknown partition -> UNKNOWN_TOPIC_OR_PARTITION;
3. the requester must be the leader (NOT_LEADER_OR_FOLLOWER) at the current leader epoch
   (FENCED_LEADER_EPOCH);
4. the partition epoch must be current (INVALID_UPDATE_VERSION: the leader acts on stale state);
5. the leader must stay in the new ISR (INVALID_REQUEST), every member must be a replica and
   eligible, i.e. unfenced and not in controlled shutdown (INELIGIBLE_REPLICA).
An accepted change becomes a PartitionChangeRecord; the answer is the partition's new state.
A change that completes a reassignment (every adding replica in the ISR) also sets the target
replicas and bumps the leader epoch: it is answered NEW_LEADER_ELECTED, as Kafka does, and the
leader waits for the metadata log.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.partition_change import eligible_brokers, eligible_for
from kmirror.metadata.controller.reassignment import PartitionTarget, build_change
from kmirror.metadata.controller.result import ApiError, ControllerResult
from kmirror.metadata.image import MetadataImage, PartitionRegistration
from kmirror.metadata.records import PartitionChangeRecord, Record


@dataclass(frozen=True, slots=True)
class AlterPartitionItem:
    topic_id: uuid.UUID
    partition_index: int
    leader_epoch: int
    new_isr: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    topic_id: uuid.UUID
    partition_index: int
    error: ApiError
    leader_id: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


def alter_partition(
    image: MetadataImage,
    broker_id: int,
    broker_epoch: int,
    items: Sequence[AlterPartitionItem],
    shutting_down: Collection[int] = (),
) -> ControllerResult[tuple[ApiError, list[AlterPartitionResult]]]:
    broker = image.brokers.get(broker_id)
    if broker is None or (broker_epoch != -1 and broker.broker_epoch != broker_epoch):
        return ControllerResult([], (ApiError(ErrorCode.stale_broker_epoch), []))
    records: list[Record] = []
    results: list[AlterPartitionResult] = []
    for item in items:
        topic = image.topics_by_id.get(item.topic_id)
        if topic is None:
            results.append(AlterPartitionResult(item.topic_id, item.partition_index, ApiError(ErrorCode.unknown_topic_id)))
            continue
        reg = topic.partitions.get(item.partition_index)
        if reg is None:
            results.append(
                AlterPartitionResult(item.topic_id, item.partition_index, ApiError(ErrorCode.unknown_topic_or_partition))
            )
            continue
        error = _validate(image, broker_id, item, reg, shutting_down)
        if error is not None:
            message = (f"{topic.name}-{item.partition_index}: the partition epoch is {reg.partition_epoch}, not "
                       f"{item.partition_epoch}" if error == ErrorCode.invalid_update_version else None)
            results.append(AlterPartitionResult(item.topic_id, item.partition_index, ApiError(error, message)))
            continue
        if item.new_isr != reg.isr:
            change = _isr_change(image, item, reg, shutting_down)
            if change is not None:
                records.append(change)
                merged = reg.merge(change)
                if merged.leader_epoch != reg.leader_epoch:
                    # The change completed a reassignment: the leader epoch moved (and maybe
                    # the leader); the leader learns its new state from the metadata log.
                    results.append(AlterPartitionResult(
                        item.topic_id, item.partition_index, ApiError(ErrorCode.new_leader_elected)))
                    continue
                reg = merged
        results.append(
            AlterPartitionResult(
                item.topic_id, item.partition_index, ApiError(ErrorCode.none), reg.leader, reg.leader_epoch, reg.isr,
                reg.partition_epoch,
            )
        )
    return ControllerResult(records, (ApiError(ErrorCode.none), results))


def _isr_change(
    image: MetadataImage, item: AlterPartitionItem, reg: PartitionRegistration, shutting_down: Collection[int]
) -> PartitionChangeRecord | None:
    """The ISR change, completing an ongoing reassignment when the new ISR allows it."""
    if not reg.is_reassigning:
        return PartitionChangeRecord(item.partition_index, item.topic_id, isr=item.new_isr)
    target = replace(PartitionTarget.of(reg), isr=item.new_isr)
    return build_change(item.topic_id, item.partition_index, reg, target,
                        eligible_for(image, reg, eligible_brokers(image, shutting_down)))


def _validate(
    image: MetadataImage,
    broker_id: int,
    item: AlterPartitionItem,
    reg: PartitionRegistration,
    shutting_down: Collection[int],
) -> ErrorCode | None:
    if reg.leader != broker_id:
        return ErrorCode.not_leader_or_follower
    if item.leader_epoch != reg.leader_epoch:
        return ErrorCode.fenced_leader_epoch
    if item.partition_epoch != reg.partition_epoch:
        return ErrorCode.invalid_update_version
    if broker_id not in item.new_isr or len(set(item.new_isr)) != len(item.new_isr):
        return ErrorCode.invalid_request
    offline = image.offline_replicas(reg)
    for b in item.new_isr:
        if b not in reg.replicas or b in offline:
            return ErrorCode.ineligible_replica
        registration = image.brokers.get(b)
        if registration is None or registration.fenced or b in shutting_down:
            return ErrorCode.ineligible_replica
    return None
