"""The node's hosted partitions and the data-plane operations on them (Kafka `ReplicaManager`).

Sans-IO. The replica manager follows the metadata image (`apply_image`): it creates a
`Partition` (and its log) for every partition whose replicas include this node, updates
leadership and configs, and deletes the logs of partitions it no longer hosts. Produce,
fetch, list-offsets, delete-records and offsets-for-leader-epoch act on the partitions this
node leads and answer per partition with a value or a `PartitionError`.

Waiting (Fetch `max_wait_ms`, acks=all) is the purgatory's business: the replica manager only
tells its append listeners which partitions grew (`add_append_listener`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from kmirror.log.config import LogConfig
from kmirror.ports import Clock
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.log_dirs import DiskUsage, describe_log_dirs
from kmirror.replication.outcomes import (
    AppendOutcome,
    EpochEndOffset,
    LogDirDescription,
    PartitionError,
    ReadOutcome,
    TimestampOffset,
)
from kmirror.replication.partition import Partition, hosted_here, partition_state_from
from kmirror.types import TopicPartition

PartitionAppendResult = AppendOutcome | PartitionError
PartitionReadResult = ReadOutcome | PartitionError

# Topics only the node itself may write (Kafka `Topic.isInternal`).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
CONSUMER_REPLICA_ID = -1


@dataclass(frozen=True, slots=True)
class FetchPartitionRequest:
    topic_partition: TopicPartition
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1


class ReplicaManager:
    def __init__(
        self,
        node_id: int,
        log_manager: Any,
        clock: Clock,
        config: Any,
        disk_usage: DiskUsage | None = None,
    ) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self.clock = clock
        self.config = config
        self.disk_usage = disk_usage
        self._partitions: dict[TopicPartition, Partition] = {}
        self._image: Any = None
        self._log_configs: dict[str, LogConfig] = {}
        self._append_listeners: list[Callable[[TopicPartition], None]] = []

    # -- following metadata -------------------------------------------------------------

    @property
    def image(self) -> Any:
        return self._image

    def apply_image(self, old_image: Any, new_image: Any) -> None:
        """Make the hosted partitions match `new_image` (Kafka `ReplicaManager.applyDelta`)."""
        del old_image  # the new image is complete; the old one is only a hint
        self._image = new_image
        wanted: dict[TopicPartition, tuple[Any, Any]] = {}
        for topic in new_image.topics.values():
            for index, registration in topic.partitions.items():
                if hosted_here(registration, self.node_id):
                    wanted[TopicPartition(topic.name, int(index))] = (topic, registration)

        for tp, partition in list(self._partitions.items()):
            entry = wanted.get(tp)
            if entry is None or entry[0].topic_id != partition.topic_id:
                self._remove_partition(tp)
        if new_image.offset >= 0:
            # Stray logs (Kafka `LogManager` strays): on disk but not hosted by the image,
            # e.g. a topic deleted, or deleted and recreated, while this node was down.
            for log in list(self.log_manager.all_logs()):
                tp = log.topic_partition
                entry = wanted.get(tp)
                if tp not in self._partitions and (
                    entry is None or (log.topic_id is not None and log.topic_id != entry[0].topic_id)
                ):
                    self.log_manager.delete_log(tp)

        log_configs: dict[str, LogConfig] = {}
        for tp, (topic, registration) in wanted.items():
            log_config = log_configs.get(tp.topic)
            if log_config is None:
                log_config = log_configs[tp.topic] = self._log_config(new_image, tp.topic)
            min_isr = log_config.min_insync_replicas
            state = partition_state_from(registration)
            existing = self._partitions.get(tp)
            if existing is None:
                log = self.log_manager.get_or_create_log(tp, topic.topic_id, log_config)
                self._partitions[tp] = Partition(tp, topic.topic_id, log, self.node_id, state, min_isr)
            else:
                partition = existing
                partition.update_state(state)
                partition.min_insync_replicas = min_isr
                if self._log_configs.get(tp.topic) != log_config:
                    _update_log_config(partition.log, log_config)
        self._log_configs = log_configs

    def _log_config(self, image: Any, topic: str) -> LogConfig:
        # Topic overrides over broker defaults (Kafka's config resolution), as a LogConfig.
        from kmirror.config.topic import effective_topic_config

        return LogConfig.from_topic_config(effective_topic_config(image, topic, self.config))

    def _remove_partition(self, tp: TopicPartition) -> None:
        self._partitions.pop(tp, None)
        self.log_manager.delete_log(tp)

    def get_partition(self, tp: TopicPartition) -> Partition | None:
        return self._partitions.get(tp)

    def partitions(self) -> Iterable[Partition]:
        return self._partitions.values()

    def leader_partitions(self, topic: str) -> list[int]:
        """Partitions of `topic` this node leads (the group coordinator loads those)."""
        return sorted(tp.partition for tp, p in self._partitions.items() if tp.topic == topic and p.is_leader)

    def topic_id(self, topic: str) -> UUID | None:
        topic_image = self._image.topics.get(topic) if self._image is not None else None
        return None if topic_image is None else topic_image.topic_id

    def topic_name(self, topic_id: UUID) -> str | None:
        if self._image is None:
            return None
        topic_image = self._image.topics_by_id.get(topic_id)
        return None if topic_image is None else topic_image.name

    def current_leader(self, tp: TopicPartition) -> tuple[int, int]:
        """(leader id, leader epoch) of `tp` in the image, (-1, -1) if unknown (KIP-951 hints)."""
        topic = self._image.topics.get(tp.topic) if self._image is not None else None
        registration = topic.partitions.get(tp.partition) if topic is not None else None
        if registration is None:
            return -1, -1
        return int(registration.leader), int(registration.leader_epoch)

    def add_append_listener(self, listener: Callable[[TopicPartition], None]) -> None:
        """Called with each partition whose log (or HW) grew, after the append."""
        self._append_listeners.append(listener)

    def remove_append_listener(self, listener: Callable[[TopicPartition], None]) -> None:
        if listener in self._append_listeners:
            self._append_listeners.remove(listener)

    def _notify_append(self, tp: TopicPartition) -> None:
        for listener in list(self._append_listeners):
            listener(tp)

    def leader_partition(self, tp: TopicPartition) -> Partition | PartitionError:
        """The partition if this node hosts it; else Kafka's error for an unknown or remote one."""
        partition = self._partitions.get(tp)
        if partition is not None:
            return partition
        if self._partition_exists(tp):
            return PartitionError(ErrorCode.not_leader_or_follower)
        return PartitionError(ErrorCode.unknown_topic_or_partition)

    def _partition_exists(self, tp: TopicPartition) -> bool:
        topic = self._image.topics.get(tp.topic) if self._image is not None else None
        return topic is not None and tp.partition in topic.partitions

    # -- produce ------------------------------------------------------------------------

    def append_records(
        self,
        entries: Mapping[TopicPartition, bytes | memoryview],
        required_acks: int,
        internal_topics_allowed: bool = False,
    ) -> dict[TopicPartition, PartitionAppendResult]:
        """Append each partition's records as leader (Kafka `ReplicaManager.appendRecords`)."""
        if required_acks not in (-1, 0, 1):
            return {tp: PartitionError(ErrorCode.invalid_required_acks) for tp in entries}
        now_ms = self.clock.now_ms()
        results: dict[TopicPartition, PartitionAppendResult] = {}
        for tp, records in entries.items():
            if tp.topic in INTERNAL_TOPICS and not internal_topics_allowed:
                results[tp] = PartitionError(
                    ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {tp.topic}"
                )
                continue
            partition = self.leader_partition(tp)
            if isinstance(partition, PartitionError):
                results[tp] = partition
                continue
            result = partition.append_records_to_leader(records, required_acks, now_ms)
            results[tp] = result
            if isinstance(result, AppendOutcome) and not result.duplicate:
                self._notify_append(tp)
        return results

    def append_to_local_log(self, tp: TopicPartition, records: bytes | memoryview) -> PartitionAppendResult:
        """The coordinators' write path (`__consumer_offsets`): acks=1 on the local leader."""
        return self.append_records({tp: records}, required_acks=1, internal_topics_allowed=True)[tp]

    # -- fetch --------------------------------------------------------------------------

    def fetch(
        self,
        requests: Iterable[FetchPartitionRequest],
        max_bytes: int,
        isolation_level: int,
        replica_id: int = CONSUMER_REPLICA_ID,
    ) -> dict[TopicPartition, PartitionReadResult]:
        """Read every requested partition in request order (Kafka `readFromLog`, KIP-74).

        `max_bytes` bounds the response, each partition's `partition_max_bytes` its share;
        the first non-empty partition may exceed both by one batch so consumers progress.
        Follower fetches (`replica_id` >= 0) are the next issue's hook: refused for now.
        """
        results: dict[TopicPartition, PartitionReadResult] = {}
        remaining = max(0, max_bytes)
        min_one_message = True
        for req in requests:
            tp = req.topic_partition
            if replica_id >= 0:
                results[tp] = PartitionError(ErrorCode.not_leader_or_follower, "follower fetch not served yet")
                continue
            partition = self.leader_partition(tp)
            if isinstance(partition, PartitionError):
                results[tp] = partition
                continue
            limit = min(max(0, req.partition_max_bytes), remaining)
            read = partition.read(req.fetch_offset, limit, isolation_level, req.current_leader_epoch, min_one_message)
            results[tp] = read
            if isinstance(read, ReadOutcome) and read.size > 0:
                min_one_message = False
                remaining = max(0, remaining - read.size)
        return results

    # -- list offsets / epochs / delete records -----------------------------------------

    def list_offset(
        self, tp: TopicPartition, timestamp: int, isolation_level: int, current_leader_epoch: int = -1
    ) -> TimestampOffset | None | PartitionError:
        partition = self.leader_partition(tp)
        if isinstance(partition, PartitionError):
            return partition
        return partition.fetch_offset_for_timestamp(timestamp, isolation_level, current_leader_epoch)

    def offset_for_leader_epoch(
        self, tp: TopicPartition, current_leader_epoch: int, leader_epoch: int
    ) -> EpochEndOffset | PartitionError:
        partition = self.leader_partition(tp)
        if isinstance(partition, PartitionError):
            return partition
        return partition.last_offset_for_leader_epoch(current_leader_epoch, leader_epoch)

    def delete_records(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | PartitionError]:
        """Advance log start offsets; each value is the new low watermark or an error."""
        results: dict[TopicPartition, int | PartitionError] = {}
        for tp, offset in offsets.items():
            partition = self.leader_partition(tp)
            results[tp] = partition if isinstance(partition, PartitionError) else partition.delete_records_on_leader(offset)
        return results

    def describe_log_dirs(self, partitions: Iterable[TopicPartition] | None = None) -> list[LogDirDescription]:
        return describe_log_dirs(self.log_manager, self._partitions, partitions, self.disk_usage)


def _update_log_config(log: Any, log_config: Any) -> None:
    update = getattr(log, "update_config", None)
    if update is not None:
        update(log_config)
    else:
        log.config = log_config
