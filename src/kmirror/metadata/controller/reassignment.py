"""Partition reassignment on the controller (Kafka's `ReplicationControlManager`
`alterPartitionReassignments` / `listPartitionReassignments`, `PartitionReassignmentReplicas`,
`PartitionReassignmentRevert` and the reassignment part of `PartitionChangeBuilder`).

A reassignment of `current` to `target` goes through three partition changes:
1. grow: `replicas` = target + (current - target), `adding` = target - current,
   `removing` = current - target; leader and ISR unchanged;
2. catch up: the new replicas fetch from the leader as followers; the leader adds them to the
   ISR with AlterPartition;
3. complete, as soon as every adding replica is in the ISR and the ISR without the removing
   replicas is not empty: `replicas` = target, ISR minus removing, adding/removing cleared, a
   new leader from the target ISR when the leader is removed, and the leader epoch bumped
   when a replica leaves (the removed replicas' fetches are fenced).
Steps 1 and 3 happen in one change when nothing is added (a shrink or a reorder).
Cancelling (replicas null) reverts to the original replicas (replicas - adding) with the ISR
restricted to them; when none of them is in the ISR the revert needs an unclean election and
is refused unless `unclean.leader.election.enable` is set for the topic.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.partition_change import eligible_for, unclean_allowed
from kmirror.metadata.controller.result import ApiError, ControllerResult
from kmirror.metadata.image import MetadataImage, PartitionRegistration
from kmirror.metadata.records import NO_LEADER, NO_LEADER_CHANGE, PartitionChangeRecord, Record


@dataclass(frozen=True, slots=True)
class ReassignmentTarget:
    partition: int
    replicas: tuple[int, ...] | None
    """None cancels the partition's ongoing reassignment."""


@dataclass(frozen=True, slots=True)
class ReassignmentResult:
    topic: str
    partition: int
    error: ApiError


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PartitionTarget:
    """What a change aims at (Kafka's PartitionChangeBuilder targets)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]

    @staticmethod
    def of(reg: PartitionRegistration) -> PartitionTarget:
        return PartitionTarget(reg.replicas, reg.isr, reg.adding_replicas, reg.removing_replicas)


def merged_replicas(current: Sequence[int], target: Sequence[int]) -> PartitionTarget:
    """Kafka's PartitionReassignmentReplicas: the grown replica set and what is added/removed
    (the ISR is filled in by the caller)."""
    removing = tuple(r for r in current if r not in target)
    adding = tuple(r for r in target if r not in current)
    return PartitionTarget(tuple(target) + removing, (), adding, removing)


def maybe_complete(target: PartitionTarget) -> PartitionTarget:
    """The completed target when every adding replica is in the ISR and the ISR without the
    removing replicas is not empty; `target` unchanged otherwise."""
    if not target.adding and not target.removing:
        return target
    isr = tuple(r for r in target.isr if r not in target.removing)
    if not isr or any(r not in isr for r in target.adding):
        return target
    replicas = tuple(r for r in target.replicas if r not in target.removing)
    return PartitionTarget(replicas, isr, (), ())


def build_change(
    topic_id: uuid.UUID,
    partition_id: int,
    reg: PartitionRegistration,
    target: PartitionTarget,
    eligible: Collection[int],
    unclean_ok: bool = False,
) -> PartitionChangeRecord | None:
    """The record moving `reg` to `target` (completed when possible), electing a leader from
    the target ISR (replica order) when the current one may not stay; None when nothing changes."""
    target = maybe_complete(target)
    isr = target.isr
    leader = reg.leader
    if leader not in isr or leader not in target.replicas or leader not in eligible:
        leader = next((r for r in target.replicas if r in isr and r in eligible), NO_LEADER)
        if leader == NO_LEADER and unclean_ok:
            leader = next((r for r in target.replicas if r in eligible), NO_LEADER)
            if leader != NO_LEADER:
                isr = (leader,)
    new_leader = NO_LEADER_CHANGE
    if leader != reg.leader or any(r not in target.replicas for r in reg.replicas):
        new_leader = leader  # a removed replica bumps the leader epoch even if the leader stays
    change = PartitionChangeRecord(
        partition_id,
        topic_id,
        isr=isr if isr != reg.isr else None,
        leader=new_leader,
        replicas=target.replicas if target.replicas != reg.replicas else None,
        removing_replicas=target.removing if target.removing != reg.removing_replicas else None,
        adding_replicas=target.adding if target.adding != reg.adding_replicas else None,
    )
    if change == PartitionChangeRecord(partition_id, topic_id):
        return None
    return change


def _validate_assignment(image: MetadataImage, replicas: Sequence[int]) -> ApiError | None:
    """Kafka's validateManualPartitionAssignment."""
    if not replicas:
        return ApiError(ErrorCode.invalid_replica_assignment, "The manual partition assignment includes an empty replica list.")
    seen: set[int] = set()
    for b in sorted(replicas):
        if b not in image.brokers:
            return ApiError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {b}, but no such broker is registered.",
            )
        if b in seen:
            return ApiError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes the broker {b} more than once.",
            )
        seen.add(b)
    return None


def _target_size(reg: PartitionRegistration) -> int:
    """The replication factor the partition is heading to (KIP-860)."""
    return len([r for r in reg.replicas if r not in reg.removing_replicas])


def alter_partition_reassignments(
    image: MetadataImage,
    topics: Mapping[str, Sequence[ReassignmentTarget]],
    eligible: Collection[int],
    broker_unclean_default: bool,
    allow_replication_factor_change: bool = True,
) -> ControllerResult[list[ReassignmentResult]]:
    records: list[Record] = []
    results: list[ReassignmentResult] = []
    for name, targets in topics.items():
        for t in targets:
            error, record = _reassign_one(image, name, t, eligible, broker_unclean_default, allow_replication_factor_change)
            if record is not None:
                records.append(record)
            results.append(ReassignmentResult(name, t.partition, error))
    return ControllerResult(records, results)


def _reassign_one(
    image: MetadataImage,
    name: str,
    t: ReassignmentTarget,
    eligible: Collection[int],
    broker_unclean_default: bool,
    allow_rf_change: bool,
) -> tuple[ApiError, PartitionChangeRecord | None]:
    topic = image.topics.get(name)
    if topic is None:
        return ApiError(ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {name}."), None
    reg = topic.partitions.get(t.partition)
    if reg is None:
        return ApiError(ErrorCode.unknown_topic_or_partition, f"Unable to find partition {name}:{t.partition}."), None
    ok = ApiError(ErrorCode.none)
    if t.replicas is None:
        if not reg.is_reassigning:
            return ApiError(ErrorCode.no_reassignment_in_progress, "No partition reassignment is in progress."), None
        original = tuple(r for r in reg.replicas if r not in reg.adding_replicas)
        isr = tuple(r for r in reg.isr if r in original)
        unclean_ok = unclean_allowed(image, name, broker_unclean_default)
        if not isr:
            if not unclean_ok:
                return ApiError(
                    ErrorCode.invalid_replica_assignment,
                    f"Unable to revert partition assignment for {name}:{t.partition} because it would require an "
                    "unclean leader election.",
                ), None
            isr = (next((r for r in original if r in eligible), original[0]),)
        revert = PartitionTarget(original, isr, (), ())
        return ok, build_change(topic.topic_id, t.partition, reg, revert, eligible_for(image, reg, eligible), unclean_ok)
    error = _validate_assignment(image, t.replicas)
    if error is not None:
        return error, None
    if not allow_rf_change and _target_size(reg) != len(t.replicas):
        return ApiError(
            ErrorCode.invalid_replication_factor,
            f"The replication factor is changed from {_target_size(reg)} to {len(t.replicas)}",
        ), None
    grown = merged_replicas(reg.replicas, t.replicas)
    target = PartitionTarget(
        grown.replicas if grown.replicas != reg.replicas else reg.replicas,
        reg.isr,
        grown.adding,
        grown.removing,
    )
    return ok, build_change(topic.topic_id, t.partition, reg, target, eligible_for(image, reg, eligible))


def list_partition_reassignments(
    image: MetadataImage, topics: Mapping[str, Sequence[int]] | None
) -> list[OngoingReassignment]:
    """Ongoing reassignments of the given partitions (None: all); unknown ones are skipped."""
    out: list[OngoingReassignment] = []
    wanted = (
        {name: sorted(t.partitions) for name, t in sorted(image.topics.items())} if topics is None else topics
    )
    for name, partitions in wanted.items():
        topic = image.topics.get(name)
        if topic is None:
            continue
        for p in partitions:
            reg = topic.partitions.get(p)
            if reg is not None and reg.is_reassigning:
                out.append(OngoingReassignment(name, p, reg.replicas, reg.adding_replicas, reg.removing_replicas))
    return out
