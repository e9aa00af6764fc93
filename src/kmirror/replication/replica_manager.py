"""The node's hosted partitions and the data-plane operations on them (Kafka `ReplicaManager`).

Sans-IO. The replica manager follows the metadata image (`apply_image`, see
`kmirror.replication.hosting`): it hosts a `Partition` (and its log) for every partition
whose replicas include this node. Produce, fetch, list-offsets, delete-records and
offsets-for-leader-epoch act on the partitions this node leads and answer per partition with
a value or a `PartitionError`.

Replication (Kafka's replication design: ISR, high watermark, KIP-101 leader epochs): follower Fetch requests (`replica_id` >= 0) are answered by the
leader `Partition`, which tracks followers and the HW. ISR changes are proposed to the
controller through an `AlterPartitionPort` (the shell sends AlterPartition, key 56, and
feeds the answer back with `handle_alter_partition_response`); `maybe_shrink_isr` is called
periodically by the shell. Partitions this node follows are announced to role listeners
(`add_role_listener`), which is how the replica fetcher learns what to fetch and from whom.

Waiting (Fetch `max_wait_ms`, acks=all) is the purgatory's business: the replica manager only
tells its append listeners which partitions grew or whose HW moved (`add_append_listener`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from uuid import UUID

from kmirror.config.server import ServerConfig
from kmirror.log.config import LogConfig
from kmirror.log.producer_state import VerificationGuard
from kmirror.metadata.image import MetadataImage
from kmirror.ports import Clock
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.change_journal import ChangeJournal
from kmirror.replication.hosting import PartitionHosting, RoleListener
from kmirror.replication.log_dirs import DiskUsage, describe_log_dirs
from kmirror.replication.metrics import replication_metrics
from kmirror.replication.outcomes import (
    READ_COMMITTED,
    UNKNOWN_EPOCH,
    AlterPartitionItem,
    AppendOutcome,
    EpochEndOffset,
    IdleRead,
    LogDirDescription,
    PartitionError,
    ReadOutcome,
    TimestampOffset,
)
from kmirror.replication.partition import Partition, PartitionState
from kmirror.replication.replica_ports import (
    AlterPartitionOutbox,
    AlterPartitionPort,
    FetchPartitionRequest,
    HostedLog,
    ReplicaLogManager,
    WriteGuard,
)
from kmirror.replication.replica_selector import may_prefer_another_replica, preferred_read_replica
from kmirror.replication.replication_quota import ReplicationQuotaManager
from kmirror.types import TopicPartition

PartitionAppendResult = AppendOutcome | PartitionError
PartitionReadResult = ReadOutcome | PartitionError

# Topics only the node itself may write (Kafka `Topic.isInternal`).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
CONSUMER_REPLICA_ID = -1


class ReplicaManager(PartitionHosting):
    def __init__(
        self,
        node_id: int,
        log_manager: ReplicaLogManager,
        clock: Clock,
        config: ServerConfig,
        disk_usage: DiskUsage | None = None,
        alter_partition: AlterPartitionPort | None = None,
    ) -> None:
        self.node_id = node_id
        self.alter_partition: AlterPartitionPort = alter_partition or AlterPartitionOutbox()
        self._role_listeners: list[RoleListener] = []
        self.log_manager = log_manager
        self.clock = clock
        self.config = config
        self.disk_usage = disk_usage
        self._partitions: dict[TopicPartition, Partition[HostedLog]] = {}
        self._image: MetadataImage | None = None
        self._log_configs: dict[str, LogConfig] = {}
        self._append_listeners: list[Callable[[TopicPartition], None]] = []
        self._followed: set[TopicPartition] = set()
        self._offline: set[TopicPartition] = set()
        self._submitted: dict[TopicPartition, AlterPartitionItem] = {}
        self._hw_seen: dict[TopicPartition, int] = {}
        self.changes = ChangeJournal()
        """Partitions whose logs moved, for fetch sessions (every hosted log reports here)."""
        self.write_guard: WriteGuard | None = None
        self.leader_quota: ReplicationQuotaManager | None = None
        """`leader.replication.throttled.rate` (set by the replication service)."""

    # -- hosted partitions ---------------------------------------------------------------

    def get_partition(self, tp: TopicPartition) -> Partition[HostedLog] | None:
        return self._partitions.get(tp)

    def partitions(self) -> Iterable[Partition[HostedLog]]:
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

    def leader_partition(self, tp: TopicPartition) -> Partition[HostedLog] | PartitionError:
        """The partition if this node hosts it; else Kafka's error for an unknown or remote one."""
        partition = self._partitions.get(tp)
        if partition is not None:
            return partition
        if tp in self._offline:
            return PartitionError(ErrorCode.kafka_storage_error, f"{tp} is offline: its log directory failed")
        if self._partition_exists(tp):
            return PartitionError(ErrorCode.not_leader_or_follower)
        return PartitionError(ErrorCode.unknown_topic_or_partition)

    def _partition_exists(self, tp: TopicPartition) -> bool:
        topic = self._image.topics.get(tp.topic) if self._image is not None else None
        return topic is not None and tp.partition in topic.partitions

    # -- produce ------------------------------------------------------------------------

    def maybe_start_transaction_verification(self, tp: TopicPartition, producer_id: int, sequence: int,
                                             producer_epoch: int) -> VerificationGuard | PartitionError:
        """Kafka `ReplicaManager.maybeStartTransactionVerificationForPartition` (KIP-890 part 1):
        before the coordinator is asked about a producer's transactional batch, the guard its
        append must carry; `SENTINEL` when the producer's transaction is already open on the
        partition (no verification needed); an error when this node cannot append there."""
        partition = self.leader_partition(tp)
        if isinstance(partition, PartitionError):
            return partition
        return partition.maybe_start_transaction_verification(producer_id, sequence, producer_epoch,
                                                              self.clock.now_ms())

    def append_records(
        self,
        entries: Mapping[TopicPartition, bytes | memoryview],
        required_acks: int,
        internal_topics_allowed: bool = False,
        verification_guards: Mapping[TopicPartition, VerificationGuard] | None = None,
    ) -> dict[TopicPartition, PartitionAppendResult]:
        """Append each partition's records as leader (Kafka `ReplicaManager.appendRecords`).
        `verification_guards` (KIP-890 part 1): given when the caller verified transactional
        batches with the coordinator; a partition missing from it appends with `SENTINEL`, so
        a batch there that would start a transaction is refused. None: not verified."""
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
            refusal = None if internal_topics_allowed else self._write_refusal(tp)
            if refusal is not None:
                results[tp] = refusal
                continue
            partition = self.leader_partition(tp)
            if isinstance(partition, PartitionError):
                results[tp] = partition
                continue
            guard = None if verification_guards is None else verification_guards.get(tp, VerificationGuard.SENTINEL)
            result = partition.append_records_to_leader(records, required_acks, now_ms, guard)
            results[tp] = result
            if isinstance(result, AppendOutcome) and not result.duplicate:
                self._notify_append(tp)
        return results

    def append_to_local_log(self, tp: TopicPartition, records: bytes | memoryview) -> PartitionAppendResult:
        """The coordinators' write path (`__consumer_offsets`): acks=1 on the local leader."""
        return self.append_records({tp: records}, required_acks=1, internal_topics_allowed=True)[tp]

    def append_coordinator_batches(self, tp: TopicPartition, records: bytes | memoryview,
                                   verification_guard: VerificationGuard | None = None) -> PartitionAppendResult:
        """Coordinator-origin batches on this leader (internal topics too): COMMIT/ABORT
        markers of WriteTxnMarkers, transactional offset commits in `__consumer_offsets`.
        Refused on a read-only partition (a KIP-1279 mirror partition): its records, markers
        included, come only from the mirror's source, and a local marker would take offsets
        the source's records own. `verification_guard`: a transactional offset commit's, from
        `maybe_start_transaction_verification` (see `Log.append_as_leader`; None: markers)."""
        partition = self._write_refusal(tp) or self.leader_partition(tp)
        if isinstance(partition, PartitionError):
            return partition
        result = partition.append_coordinator_batches_to_leader(records, self.clock.now_ms(), verification_guard)
        if isinstance(result, AppendOutcome):
            self._notify_append(tp)
        return result

    # -- fetch --------------------------------------------------------------------------

    def fetch(
        self,
        requests: Iterable[FetchPartitionRequest],
        max_bytes: int,
        isolation_level: int,
        replica_id: int = CONSUMER_REPLICA_ID,
        client_rack: str | None = None,
        replica_epoch: int = -1,
    ) -> dict[TopicPartition, PartitionReadResult]:
        """Read every requested partition in request order (Kafka `readFromLog`, KIP-74).

        `max_bytes` bounds the response, each partition's `partition_max_bytes` its share;
        the first non-empty partition may exceed both by one batch so consumers progress.
        Followers (`replica_id` >= 0) read up to the LEO on the leader, which updates their
        fetch state, HW and ISR. Consumers with client metadata (`client_rack` not None,
        Fetch v11+) may read from a follower, and a leader with a rack-aware replica
        selector may send them to a follower in their rack (KIP-392) instead of answering.
        """
        results: dict[TopicPartition, PartitionReadResult] = {}
        remaining = max(0, max_bytes)
        min_one_message = True
        now_ms = self.clock.monotonic_ms()
        for req in requests:
            tp = req.topic_partition
            partition = self.leader_partition(tp)
            if isinstance(partition, PartitionError):
                results[tp] = partition
                continue
            limit = min(max(0, req.partition_max_bytes), remaining)
            read: PartitionReadResult
            if replica_id >= 0:
                throttled = self._leader_throttles(partition, replica_id)
                held_back = throttled and self.leader_quota is not None and self.leader_quota.is_quota_exceeded(now_ms)
                read = partition.fetch_for_follower(
                    replica_id, req.fetch_offset, req.last_fetched_epoch, req.current_leader_epoch,
                    0 if held_back else limit, min_one_message and not held_back, now_ms, req.log_start_offset,
                    replica_epoch,
                )
                if throttled and self.leader_quota is not None and isinstance(read, ReadOutcome):
                    self.leader_quota.record(read.size, now_ms)
                self._after_follower_fetch(partition)
            else:
                preferred = preferred_read_replica(
                    partition, self._image, self.config, self.node_id, client_rack, req.fetch_offset, now_ms
                )
                if preferred is not None:
                    results[tp] = preferred
                    continue
                read = partition.read(
                    req.fetch_offset, limit, isolation_level, req.current_leader_epoch, min_one_message,
                    fetch_only_from_leader=client_rack is None,
                )
            results[tp] = read
            if isinstance(read, ReadOutcome) and read.size > 0:
                min_one_message = False
                remaining = max(0, remaining - read.size)
        return results

    def idle_consumer_read(self, tp: TopicPartition, fetch_offset: int, isolation_level: int,
                           current_leader_epoch: int, client_rack: str | None) -> IdleRead | None:
        """The offsets of the answer `fetch` gives a consumer (`replica_id` -1) reading `tp` at
        `fetch_offset` when that answer holds no records, no error and no preferred read
        replica; None when it may hold any of them (the caller then reads). A few comparisons
        instead of a read: the thousands of idle partitions of a wide consumer's fetch are
        answered without building a read for each, and a fetch session passes over those
        whose offsets did not move."""
        partition = self._partitions.get(tp)
        if partition is None or (client_rack and may_prefer_another_replica(self.config)):
            return None
        # `Partition.read`'s checks, on the fields directly: this runs for every partition of
        # a session on every read of it.
        state = partition.state
        if state.leader != partition.local_broker_id or (
                current_leader_epoch != UNKNOWN_EPOCH and current_leader_epoch != state.leader_epoch):
            return None
        log = partition.log
        log_start = log.log_start_offset
        if fetch_offset < log_start or fetch_offset > log.log_end_offset:
            return None  # OFFSET_OUT_OF_RANGE
        high_watermark, last_stable = log.high_watermark, log.last_stable_offset
        if fetch_offset < (last_stable if isolation_level == READ_COMMITTED else high_watermark):
            return None  # records to read
        return IdleRead(high_watermark, last_stable, log_start)

    def _leader_throttles(self, partition: Partition[HostedLog], replica_id: int) -> bool:
        """Kafka `shouldLeaderThrottle` (before the quota check): a throttled partition and a
        follower outside the ISR."""
        quota = self.leader_quota
        return quota is not None and replica_id not in partition.isr and quota.is_throttled(partition.topic_partition)

    def _after_follower_fetch(self, partition: Partition[HostedLog]) -> None:
        tp = partition.topic_partition
        pending = partition.pending_alter_partition()
        if pending is not None and pending != self._submitted.get(tp):
            self._submitted[tp] = pending
            self.alter_partition.submit(pending)
        if partition.high_watermark != self._hw_seen.get(tp):
            # The HW moved: parked acks=all produces and consumer fetches re-check.
            self._hw_seen[tp] = partition.high_watermark
            self._notify_append(tp)

    # -- ISR maintenance ----------------------------------------------------------------

    def maybe_shrink_isr(self) -> list[AlterPartitionItem]:
        """Kafka's `isr-expiration` task: propose removing lagging followers from every led
        partition's ISR (call every `replica.lag.time.max.ms / 2`)."""
        now_ms = self.clock.monotonic_ms()
        items: list[AlterPartitionItem] = []
        for partition in self._partitions.values():
            item = partition.maybe_shrink_isr(now_ms)
            if item is not None:
                self._submitted[partition.topic_partition] = item
                self.alter_partition.submit(item)
                items.append(item)
        return items

    def handle_alter_partition_response(
        self, item: AlterPartitionItem, error: int, committed: PartitionState | None = None
    ) -> None:
        """Feed the controller's answer to `item` back into its partition."""
        partition = self._partitions.get(TopicPartition(item.topic, item.partition))
        if partition is None:
            return
        partition.handle_alter_partition_response(item, ErrorCode(error), committed)
        if partition.pending_alter_partition() != item:
            self._submitted.pop(partition.topic_partition, None)
        # else refused until the image brings a newer registration (INVALID_UPDATE_VERSION and
        # alike): it stays submitted, so that a follower's fetch does not send it again
        self._notify_append(partition.topic_partition)

    # -- follower side (the replica fetcher's local replica) -----------------------------

    def follower_partition(self, tp: TopicPartition) -> Partition[HostedLog] | None:
        """The partition if this node hosts it and follows its leader."""
        partition = self._partitions.get(tp)
        return partition if partition is not None and not partition.is_leader else None

    def notify_follower_progress(self, tp: TopicPartition) -> None:
        """The fetcher appended or moved the HW: wake consumers fetching from this follower."""
        self._notify_append(tp)

    # -- metrics ------------------------------------------------------------------------

    def replication_metrics(self) -> dict[str, float]:
        """Kafka's replication metrics as plain values; the metrics layer turns the
        IsrShrinks/IsrExpands counts into rates."""
        return replication_metrics(self._partitions.values(), self.clock.monotonic_ms())

    # -- list offsets / epochs / delete records -----------------------------------------

    def list_offset(
        self,
        tp: TopicPartition,
        timestamp: int,
        isolation_level: int,
        current_leader_epoch: int = -1,
        from_replica: bool = False,
    ) -> TimestampOffset | None | PartitionError:
        partition = self.leader_partition(tp)
        if isinstance(partition, PartitionError):
            return partition
        return partition.fetch_offset_for_timestamp(timestamp, isolation_level, current_leader_epoch, from_replica)

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
            refusal = self._write_refusal(tp)
            partition = refusal or self.leader_partition(tp)
            results[tp] = partition if isinstance(partition, PartitionError) else partition.delete_records_on_leader(offset)
        return results

    def _write_refusal(self, tp: TopicPartition) -> PartitionError | None:
        return None if self.write_guard is None else self.write_guard.write_refusal(tp)

    def describe_log_dirs(self, partitions: Iterable[TopicPartition] | None = None) -> list[LogDirDescription]:
        return describe_log_dirs(self.log_manager, self._partitions, partitions, self.disk_usage)

