"""Topic creation, deletion and partition growth (Kafka's ReplicationControlManager)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from kmirror.config.mirror import MIRROR_NAME_CONFIG
from kmirror.config.server import ServerConfig
from kmirror.config.topic import validate_topic_config
from kmirror.kip1279.membership import managed_config_refusal
from kmirror.metadata.controller.log_dirs import default_directories
from kmirror.metadata.controller.placement import (
    broker_racks,
    check_assignment,
    live_broker_ids,
    new_topic_id,
    place_replicas,
    usable_broker_ids,
)
from kmirror.metadata.controller.result import NONE, ApiError, ControllerResult, Rng
from kmirror.metadata.image import ConfigResourceType, MetadataImage
from kmirror.metadata.records import ConfigRecord, PartitionRecord, Record, RemoveTopicRecord, TopicRecord

MAX_TOPIC_NAME_LENGTH = 249
MAX_PARTITIONS_PER_BATCH = 10_000
"""Kafka's `ReplicationControlManager.MAX_PARTITIONS_PER_BATCH`: one CreateTopics or
CreatePartitions request adds at most this many partitions, checked before any placement."""
EXCESSIVE_BATCH = ApiError(ErrorCode.policy_violation, "Excessively large number of partitions per request.")
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def is_internal_topic(name: str) -> bool:
    return name in INTERNAL_TOPICS


def validate_topic_name(name: str) -> ApiError | None:
    """Kafka's Topic.validate: legal characters, length, not `.` or `..` (INVALID_TOPIC_EXCEPTION)."""
    if not name:
        return ApiError(ErrorCode.invalid_topic_exception, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        return ApiError(ErrorCode.invalid_topic_exception, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return ApiError(
            ErrorCode.invalid_topic_exception,
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters, topic name: {name}",
        )
    if not _LEGAL.match(name):
        return ApiError(
            ErrorCode.invalid_topic_exception,
            f"Topic name \"{name}\" is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
        )
    return None


def _collision_key(name: str) -> str:
    return name.replace(".", "_")


@dataclass(frozen=True)
class CreatableTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, Sequence[int]] = field(default_factory=dict)
    configs: Mapping[str, str | None] = field(default_factory=dict)
    topic_id: uuid.UUID | None = None
    """KIP-1279 CreateTopics v8 MirrorInfo: create the topic with the source cluster's topic id
    (None: a fresh random id)."""
    mirror_name: str | None = None
    """AddTopicsToMirror: the topic is created attached to this mirror (its `mirror.name`, which
    `configs` may not hold: `managed_config_refusal`)."""


@dataclass(frozen=True)
class CreateTopicResult:
    name: str
    error: ApiError = NONE
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1


def create_topics(
    image: MetadataImage,
    topics: Sequence[CreatableTopic],
    config: ServerConfig,
    rng: Rng,
    *,
    validate_only: bool = False,
) -> ControllerResult[list[CreateTopicResult]]:
    """One result per requested topic, in request order; records only for the topics created
    (none when `validate_only`). Names listed twice fail with INVALID_REQUEST, like Kafka.

    Limits, checked before any placement and for `validate_only` too: more than
    MAX_PARTITIONS_PER_BATCH partitions in the request fails every topic with POLICY_VIOLATION
    (Kafka `validateTotalNumberOfPartitions`); a topic that would take the cluster past
    `max.partitions` fails with POLICY_VIOLATION (KIP-578's cluster-wide limit)."""
    if requested_partitions(topics, config.num_partitions) > MAX_PARTITIONS_PER_BATCH:
        return ControllerResult([], [CreateTopicResult(t.name, EXCESSIVE_BATCH) for t in topics])
    budget = PartitionBudget(image, config)
    counts: dict[str, int] = {}
    for t in topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    existing_keys = {_collision_key(n): n for n in image.topics}
    taken_ids: set[uuid.UUID] = set()
    records: list[Record] = []
    results: list[CreateTopicResult] = []
    for t in topics:
        if counts[t.name] > 1:
            results.append(
                CreateTopicResult(t.name, ApiError(ErrorCode.invalid_request, f"Duplicate topic name: {t.name}"))
            )
            continue
        outcome = _create_one(image, t, config, rng, existing_keys, taken_ids, budget)
        if isinstance(outcome, ApiError):
            results.append(CreateTopicResult(t.name, outcome))
            continue
        topic_records, result = outcome
        budget.take(result.num_partitions)
        existing_keys[_collision_key(t.name)] = t.name
        if result.topic_id is not None:
            taken_ids.add(result.topic_id)
        if not validate_only:
            records.extend(topic_records)
        results.append(result)
    return ControllerResult(records, results)


def _create_one(
    image: MetadataImage,
    t: CreatableTopic,
    config: ServerConfig,
    rng: Rng,
    existing_keys: Mapping[str, str],
    taken_ids: set[uuid.UUID],
    budget: PartitionBudget,
) -> tuple[list[Record], CreateTopicResult] | ApiError:
    err = validate_topic_name(t.name)
    if err is not None:
        return err
    if t.name in image.topics or existing_keys.get(_collision_key(t.name)) == t.name:
        return ApiError(ErrorCode.topic_already_exists, f"Topic '{t.name}' already exists.")
    clash = existing_keys.get(_collision_key(t.name))
    if clash is not None:
        return ApiError(
            ErrorCode.invalid_topic_exception,
            f"Topic '{t.name}' collides with existing topic: {clash}",
        )
    if t.topic_id is not None and (t.topic_id.int <= 1 or t.topic_id in image.topics_by_id
                                   or t.topic_id in taken_ids):
        return ApiError(ErrorCode.invalid_request if t.topic_id.int <= 1 else ErrorCode.topic_already_exists,
                        f"Topic id {t.topic_id} cannot be used for topic '{t.name}'")
    reasons = (managed_config_refusal(t.configs), *(validate_topic_config(n, v) for n, v in t.configs.items()))
    reason = next((r for r in reasons if r is not None), None)
    if reason is not None:
        return ApiError(ErrorCode.invalid_config, reason)

    registered = sorted(image.brokers)
    if t.assignments:
        if t.num_partitions != -1 or t.replication_factor != -1:
            return ApiError(
                ErrorCode.invalid_request,
                "A manual partition assignment was specified, but numPartitions or replicationFactor was not set to -1.",
            )
        err = budget.check(len(t.assignments)) or check_assignment(t.assignments, 0, registered)
        if err is not None:
            return err
        assignment = [tuple(t.assignments[p]) for p in range(len(t.assignments))]
    else:
        num_partitions = config.num_partitions if t.num_partitions == -1 else t.num_partitions
        replication_factor = config.default_replication_factor if t.replication_factor == -1 else t.replication_factor
        if num_partitions <= 0:
            return ApiError(
                ErrorCode.invalid_partitions, "Number of partitions was set to an invalid non-positive value."
            )
        if replication_factor <= 0:
            return ApiError(
                ErrorCode.invalid_replication_factor, "Replication factor must be larger than 0, or -1 to use the default value."
            )
        err = budget.check(num_partitions)
        if err is not None:
            return err
        placed = place_replicas(usable_broker_ids(image), 0, num_partitions, replication_factor, rng, broker_racks(image))
        if isinstance(placed, ApiError):
            return placed
        assignment = placed

    topic_id = t.topic_id if t.topic_id is not None else new_topic_id(image, rng, taken_ids)
    records: list[Record] = [TopicRecord(t.name, topic_id)]
    configs = dict(t.configs) if t.mirror_name is None else {**t.configs, MIRROR_NAME_CONFIG: t.mirror_name}
    for name, value in sorted(configs.items()):
        if value is not None:
            records.append(ConfigRecord(ConfigResourceType.TOPIC, t.name, name, value))
    records.extend(_partition_records(image, topic_id, 0, assignment))
    return records, CreateTopicResult(t.name, NONE, topic_id, len(assignment), len(assignment[0]))


def _partition_records(
    image: MetadataImage, topic_id: uuid.UUID, first: int, assignment: Sequence[tuple[int, ...]]
) -> list[Record]:
    """The ISR is the live replicas; the leader the first of them (-1 when none is live); each
    replica in its broker's only log directory, else UNASSIGNED (`log_dirs.default_directories`)."""
    live = set(live_broker_ids(image))
    out: list[Record] = []
    for i, replicas in enumerate(assignment):
        isr = tuple(b for b in replicas if b in live)
        leader = isr[0] if isr else -1
        out.append(PartitionRecord(first + i, topic_id, tuple(replicas), isr, leader, 0, 0,
                                   directories=default_directories(image, replicas)))
    return out


@dataclass(frozen=True)
class DeleteTopicResult:
    name: str | None
    topic_id: uuid.UUID | None
    error: ApiError = NONE


def delete_topics(
    image: MetadataImage,
    names: Sequence[str],
    topic_ids: Sequence[uuid.UUID],
    config: ServerConfig,
) -> ControllerResult[list[DeleteTopicResult]]:
    """Results for names first, then ids, in request order. UNKNOWN_TOPIC_OR_PARTITION for an
    unknown name, UNKNOWN_TOPIC_ID for an unknown id, TOPIC_DELETION_DISABLED when
    `delete.topic.enable=false`."""
    results: list[DeleteTopicResult] = []
    records: list[Record] = []
    removed: set[uuid.UUID] = set()
    wanted: list[tuple[str | None, uuid.UUID | None]] = [(n, None) for n in names] + [(None, i) for i in topic_ids]
    for name, tid in wanted:
        topic = image.topics.get(name) if name is not None else image.topics_by_id.get(tid)  # type: ignore[arg-type]
        if topic is None:
            if name is not None:
                err = ApiError(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")
            else:
                err = ApiError(ErrorCode.unknown_topic_id, "This server does not host this topic ID.")
            results.append(DeleteTopicResult(name, tid, err))
            continue
        if not config.delete_topic_enable:
            results.append(
                DeleteTopicResult(
                    topic.name, topic.topic_id, ApiError(ErrorCode.topic_deletion_disabled, "Topic deletion is disabled.")
                )
            )
            continue
        if topic.topic_id not in removed:
            removed.add(topic.topic_id)
            records.append(RemoveTopicRecord(topic.topic_id))
        results.append(DeleteTopicResult(topic.name, topic.topic_id))
    return ControllerResult(records, results)


@dataclass(frozen=True)
class CreatePartitionsTopic:
    name: str
    count: int
    assignments: Sequence[Sequence[int]] | None = None
    """Replicas of each new partition, in order (None: placed by the controller)."""


@dataclass(frozen=True)
class CreatePartitionsResult:
    name: str
    error: ApiError = NONE


def create_partitions(
    image: MetadataImage,
    topics: Sequence[CreatePartitionsTopic],
    config: ServerConfig,
    rng: Rng,
    *,
    validate_only: bool = False,
) -> ControllerResult[list[CreatePartitionsResult]]:
    """The same limits as `create_topics`, on the partitions added, before any placement."""
    added = 0
    for t in topics:
        topic = image.topics.get(t.name)
        if topic is not None:
            added += max(0, t.count - len(topic.partitions))
    if added > MAX_PARTITIONS_PER_BATCH:
        return ControllerResult([], [CreatePartitionsResult(t.name, EXCESSIVE_BATCH) for t in topics])
    budget = PartitionBudget(image, config)
    counts: dict[str, int] = {}
    for t in topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    records: list[Record] = []
    results: list[CreatePartitionsResult] = []
    for t in topics:
        if counts[t.name] > 1:
            err: ApiError | None = ApiError(ErrorCode.invalid_request, "Duplicate topic name.")
        else:
            outcome = _grow(image, t, rng, budget)
            if isinstance(outcome, ApiError):
                err = outcome
            else:
                err = None
                budget.take(len(outcome))
                if not validate_only:
                    records.extend(outcome)
        results.append(CreatePartitionsResult(t.name, err or NONE))
    return ControllerResult(records, results)


def _grow(image: MetadataImage, t: CreatePartitionsTopic, rng: Rng,
          budget: PartitionBudget) -> list[Record] | ApiError:
    topic = image.topics.get(t.name)
    if topic is None:
        return ApiError(ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.")
    current = len(topic.partitions)
    if t.count < current:
        return ApiError(
            ErrorCode.invalid_partitions,
            f"The topic {t.name} currently has {current} partition(s); {t.count} would not be an increase.",
        )
    if t.count == current:
        return ApiError(ErrorCode.invalid_partitions, f"Topic already has {current} partition(s).")
    added = t.count - current
    err = budget.check(added)
    if err is not None:
        return err
    replication_factor = len(topic.partitions[0].replicas) if topic.partitions else 1
    if t.assignments is not None:
        if len(t.assignments) != added:
            return ApiError(
                ErrorCode.invalid_replica_assignment,
                f"Attempted to add {added} additional partition(s), but only {len(t.assignments)} assignment(s) were specified.",
            )
        by_partition = {current + i: tuple(a) for i, a in enumerate(t.assignments)}
        err = check_assignment(by_partition, current, sorted(image.brokers))
        if err is not None:
            return err
        if any(len(a) != replication_factor for a in by_partition.values()):
            return ApiError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes a partition with a replication factor other than {replication_factor}.",
            )
        assignment: list[tuple[int, ...]] = [by_partition[p] for p in sorted(by_partition)]
    else:
        placed = place_replicas(usable_broker_ids(image), current, added, replication_factor, rng, broker_racks(image))
        if isinstance(placed, ApiError):
            return placed
        assignment = placed
    return _partition_records(image, topic.topic_id, current, assignment)


def requested_partitions(topics: Sequence[CreatableTopic], default_num_partitions: int) -> int:
    """An upper bound of the partitions a CreateTopics request adds (Kafka's count: the
    default for -1, manual assignments by their size, non-positive counts as none)."""
    total = 0
    for t in topics:
        if t.assignments:
            total += len(t.assignments)
        elif t.num_partitions == -1:
            total += default_num_partitions
        elif t.num_partitions > 0:
            total += t.num_partitions
    return total


class PartitionBudget:
    """The partitions the cluster may still gain under `max.partitions` within one request."""

    def __init__(self, image: MetadataImage, config: ServerConfig) -> None:
        self.limit = int(config.get("max.partitions"))
        self.used = sum(len(topic.partitions) for topic in image.topics.values())

    def check(self, wanted: int) -> ApiError | None:
        if self.used + wanted <= self.limit:
            return None
        return ApiError(
            ErrorCode.policy_violation,
            f"Adding {wanted} partition(s) would take the cluster to {self.used + wanted} partitions, "
            f"over max.partitions={self.limit}.",
        )

    def take(self, partitions: int) -> None:
        self.used += partitions
