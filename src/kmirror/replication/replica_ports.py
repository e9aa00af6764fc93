"""`ReplicaManager`'s request values and collaborator ports (Kafka names its collaborators in
`ReplicaManager`'s constructor): the logs it hosts partitions on, what a Fetch asks of one
partition, what the replica fetcher follows, where ISR changes go, and who may refuse a
client write."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

from kmirror.log.config import LogConfig
from kmirror.log.epoch_cache import EpochCache
from kmirror.replication.log_port import PartitionLog
from kmirror.replication.outcomes import AlterPartitionItem, PartitionError
from kmirror.types import TopicPartition


class HostedLog(PartitionLog, Protocol):
    """A partition's log as this node hosts it (`kmirror.log.Log`): what the partition uses,
    plus what the replica manager reads and sets (the log's partition and topic id, its
    topic config, its size on disk) and the epoch cache its partitions' other users read
    (the KIP-1279 mirror lifecycle: last mirrored epoch, LME truncation)."""

    config: LogConfig
    on_change: Callable[[TopicPartition], None] | None
    """Told the partition when the log end, high watermark or log start moves."""

    @property
    def topic_partition(self) -> TopicPartition: ...

    @property
    def topic_id(self) -> UUID | None: ...

    @property
    def size_in_bytes(self) -> int: ...

    @property
    def epoch_cache(self) -> EpochCache: ...


class ReplicaLogManager(Protocol):
    """The logs under `log.dirs` (`kmirror.log.LogManager`)."""

    @property
    def log_dirs(self) -> Sequence[str]: ...

    @property
    def offline_dirs(self) -> Collection[str]:
        """The log dirs that failed (KIP-858)."""
        ...

    def get_log(self, tp: TopicPartition) -> HostedLog | None: ...

    def get_or_create_log(self, tp: TopicPartition, topic_id: UUID, config: LogConfig, *,
                          is_new: bool = True) -> HostedLog:
        """The log of `tp`, created when missing; an existing one takes `config`. A missing log
        that is not new is not created while a log dir is offline (KafkaStorageError)."""
        ...

    def all_logs(self) -> Iterable[HostedLog]: ...

    def delete_logs(self, tps: Iterable[TopicPartition]) -> Sequence[TopicPartition]:
        """Delete these logs; returns those deleted."""
        ...

    def log_dir_of(self, tp: TopicPartition) -> str | None: ...

    @property
    def has_new_logs(self) -> bool:
        """Logs created since the last `flush_new_logs` whose topic id is not durable yet."""
        ...

    def flush_new_logs(self, stop: Callable[[], bool] = ...) -> int:
        """Make new logs durable (a worker thread may call it); returns how many."""
        ...


@dataclass(frozen=True, slots=True)
class FetchPartitionRequest:
    topic_partition: TopicPartition
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1  # Fetch v12+ (followers): the epoch of the last fetched batch
    log_start_offset: int = -1  # followers report their log start offset


@dataclass(frozen=True, slots=True)
class FollowedPartition:
    """A partition this node follows: what the replica fetcher needs to fetch it."""

    topic_partition: TopicPartition
    topic_id: UUID
    leader_id: int
    leader_epoch: int


class AlterPartitionPort(Protocol):
    """Sends an ISR change to the controller; the answer comes back through
    `ReplicaManager.handle_alter_partition_response`."""

    def submit(self, item: AlterPartitionItem) -> None: ...


class AlterPartitionOutbox:
    """The default port: keeps proposals for whoever drains them (tests, simulations)."""

    def __init__(self) -> None:
        self.items: list[AlterPartitionItem] = []

    def submit(self, item: AlterPartitionItem) -> None:
        self.items.append(item)

    def drain(self) -> list[AlterPartitionItem]:
        items, self.items = self.items, []
        return items


class WriteGuard(Protocol):
    """Refuses client writes (Produce, DeleteRecords) to a partition, e.g. a KIP-1279 mirror
    topic (READ_ONLY_TOPIC). Replication, mirroring and internal appends never ask it."""

    def write_refusal(self, tp: TopicPartition) -> PartitionError | None: ...
