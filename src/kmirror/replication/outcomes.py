"""Outcome values of the data plane, mapped to Kafka error codes by the handlers.

Every per-partition operation of `Partition` and `ReplicaManager` returns either its
result or a `PartitionError`: an expected outcome (not leader, fenced epoch, offset out
of range...), never an exception. Exceptions are left for broken invariants and disks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import wraps
from typing import Concatenate, NamedTuple, ParamSpec, TypeVar
from uuid import UUID

from kmirror.log.fs import KafkaStorageError
from kmirror.protocol.errors import ErrorCode

# Isolation levels as sent in Fetch / ListOffsets (KIP-98).
READ_UNCOMMITTED = 0
READ_COMMITTED = 1

# Special ListOffsets timestamps (Kafka `ListOffsetsRequest`).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

NO_TIMESTAMP = -1
# A leader epoch not known: sent by clients that do not know (or do not check) the leader
# epoch, answered when a log holds no epoch for an offset.
UNKNOWN_EPOCH = -1


@dataclass(frozen=True, slots=True)
class PartitionError:
    """An expected per-partition failure, carrying the Kafka error code it maps to."""

    code: ErrorCode
    message: str | None = None
    # Per-batch errors (ProduceResponse `record_errors`): (batch index, message).
    record_errors: tuple[tuple[int, str | None], ...] = ()


@dataclass(frozen=True, slots=True)
class AppendOutcome:
    """What a leader append produced (Kafka `LogAppendInfo`, reduced to what clients see)."""

    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    duplicate: bool = False  # an idempotent retry answered with the original offsets


class IdleRead(NamedTuple):
    """A consumer read that holds no records, no error and no preferred read replica: the
    offsets its answer carries (`ReplicaManager.idle_consumer_read`)."""

    high_watermark: int
    last_stable_offset: int
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """OffsetsForLeaderEpoch answer: the largest epoch <= the requested one, and its end offset."""

    leader_epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class ReadOutcome:
    """One partition's Fetch answer. `records` are the stored bytes, never re-encoded."""

    records: bytes | memoryview
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int
    aborted_transactions: tuple[tuple[int, int], ...] = ()  # (producer_id, first_offset)
    # Follower fetch (Fetch v12+): the epoch and end offset the follower's log diverges at.
    diverging_epoch: EpochEndOffset | None = None
    # KIP-392: the replica the consumer should fetch from instead (-1: keep fetching here).
    preferred_read_replica: int = -1

    @property
    def size(self) -> int:
        return len(self.records)


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    """ListOffsets answer: the offset found, its timestamp and the epoch it was written in."""

    timestamp: int
    offset: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class LogDirPartition:
    size_bytes: int
    offset_lag: int = 0
    is_future: bool = False


@dataclass(frozen=True, slots=True)
class LogDirDescription:
    """DescribeLogDirs answer for one log dir."""

    path: str
    partitions: dict[tuple[str, int], LogDirPartition] = field(default_factory=dict)
    total_bytes: int = -1
    usable_bytes: int = -1
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class AlterPartitionItem:
    """One partition's ISR change proposed by its leader (AlterPartition, key 56)."""

    topic: str
    partition: int
    topic_id: UUID
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    broker_epochs: tuple[int, ...]  # per `new_isr` member, -1 when unknown (KIP-903)


S = TypeVar("S")
P = ParamSpec("P")
R = TypeVar("R")


def storage_guarded(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R | PartitionError]:
    """`method`, answering KAFKA_STORAGE_ERROR when its log's directory has failed (Kafka's
    `KafkaStorageException`; the node takes the partition offline meanwhile)."""
    @wraps(method)
    def guarded(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R | PartitionError:
        try:
            return method(self, *args, **kwargs)
        except KafkaStorageError as exc:
            return PartitionError(ErrorCode.kafka_storage_error, str(exc))
    return guarded
