"""ElectLeaders on the controller (Kafka `ReplicationControlManager.electLeaders`, KIP-460).

PREFERRED (0): the first replica becomes leader if it is an eligible ISR member;
ELECTION_NOT_NEEDED when it already leads, PREFERRED_LEADER_NOT_AVAILABLE otherwise.
UNCLEAN (1): only for partitions without a leader: a clean candidate from the ISR first, else
any eligible replica (ISR = [it]; data acknowledged by the old ISR may be lost, the caller
warns); ELECTION_NOT_NEEDED when a leader exists, ELIGIBLE_LEADERS_NOT_AVAILABLE when nobody can
lead. `partitions=None` means every partition; then, as Kafka, partitions whose election was not
needed are left out of the answer (errors and performed elections are reported).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.partition_change import (
    change_record,
    elect,
    eligible_for,
    preferred_leader_change,
)
from kmirror.metadata.controller.result import ApiError, ControllerResult
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.records import NO_LEADER, Record

PREFERRED = 0
UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class ElectionResult:
    topic: str
    partition: int
    error: ApiError
    unclean_leader: int | None = None


def elect_leaders(
    image: MetadataImage,
    election_type: int,
    partitions: Mapping[str, Sequence[int]] | None,
    eligible: Collection[int],
) -> ControllerResult[list[ElectionResult]]:
    if election_type not in (PREFERRED, UNCLEAN):
        return ControllerResult([], [ElectionResult("", -1, ApiError(ErrorCode.invalid_request, "unknown election type"))])
    wanted: list[tuple[str, int]]
    report_all = partitions is not None
    if partitions is None:
        wanted = [(t.name, p) for t in image.topics.values() for p in sorted(t.partitions)]
    else:
        wanted = [(name, p) for name, ps in partitions.items() for p in ps]
    records: list[Record] = []
    results: list[ElectionResult] = []
    for name, p in wanted:
        topic = image.topics.get(name)
        reg = None if topic is None else topic.partitions.get(p)
        if topic is None:
            results.append(ElectionResult(name, p, ApiError(ErrorCode.unknown_topic_or_partition, f"No such topic as {name}")))
            continue
        if reg is None:
            results.append(ElectionResult(
                name, p, ApiError(ErrorCode.unknown_topic_or_partition, f"No such partition as {name}-{p}")))
            continue
        if election_type == PREFERRED:
            if reg.replicas and reg.leader == reg.replicas[0]:
                if report_all:
                    results.append(ElectionResult(name, p, ApiError(ErrorCode.election_not_needed)))
                continue
            record = preferred_leader_change(topic.topic_id, p, reg, eligible_for(image, reg, eligible))
            if record is None:
                results.append(
                    ElectionResult(
                        name, p, ApiError(ErrorCode.preferred_leader_not_available,
                                          f"Failed to elect leader for partition {name}-{p} under strategy PREFERRED")
                    )
                )
                continue
            records.append(record)
            results.append(ElectionResult(name, p, ApiError(ErrorCode.none)))
            continue
        if reg.leader != NO_LEADER:
            if report_all:
                results.append(ElectionResult(name, p, ApiError(ErrorCode.election_not_needed)))
            continue
        election = elect(reg, reg.isr, eligible_for(image, reg, eligible), unclean_ok=True)
        unclean_record = change_record(topic.topic_id, p, reg, election) if election.leader != NO_LEADER else None
        if unclean_record is None:
            results.append(ElectionResult(name, p, ApiError(ErrorCode.eligible_leaders_not_available)))
            continue
        records.append(unclean_record)
        results.append(ElectionResult(name, p, ApiError(ErrorCode.none), election.leader if election.unclean else None))
    return ControllerResult(records, results)
