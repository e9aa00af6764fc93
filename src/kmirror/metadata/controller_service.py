"""`MetadataService`: the single active controller (Kafka's `QuorumController`) of a node with
the controller role, and the metadata image of its broker when the node is combined.

Every operation runs the sans-IO controller logic under one lock (single writer), makes the
records durable in the metadata log (`MetadataLogStore.append`: written and flushed before it
returns), replays them into a new image, notifies subscribers, then answers. A failed append
leaves the image untouched and raises (a broken disk is not an expected outcome).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal, TypeVar

from kio.schema.errors import ErrorCode

from kmirror.config.group import DEFAULT_BOUNDS
from kmirror.config.server import ServerConfig
from kmirror.kip1279.membership import Rejected, SetMirrorName
from kmirror.kip1279.state import MirrorPartitionState
from kmirror.metadata.cluster_control import ClusterControl
from kmirror.metadata.config_description import DescribeConfigsResult, describe_configs
from kmirror.metadata.controller import acls as acl_ops
from kmirror.metadata.controller import client_quotas as quota_ops
from kmirror.metadata.controller import configs as config_ops
from kmirror.metadata.controller import mirrors as mirror_ops
from kmirror.metadata.controller import scram as scram_ops
from kmirror.metadata.controller import topics as topic_ops
from kmirror.metadata.controller.brokers import BrokerHeartbeatManager, register_broker
from kmirror.metadata.controller.features import bootstrap_records
from kmirror.metadata.controller.producer_ids import allocate_producer_ids
from kmirror.metadata.controller.result import (
    ApiError,
    ControllerResult,
    MetadataOperationError,
    NotControllerError,
    Rng,
    random_kafka_uuid,
)
from kmirror.metadata.delegation_token_control import DelegationTokenControl
from kmirror.metadata.image import EMPTY_IMAGE, AclBinding, ConfigResource, MetadataImage, TopicImage
from kmirror.metadata.internal_topics import ensure_internal_topic
from kmirror.metadata.quorum_service import OperationLock, QuorumControl, Written, to_the_end
from kmirror.metadata.quorum_state import QuorumObservers
from kmirror.metadata.records import BrokerEndpoint, Record, encode
from kmirror.metadata.snapshot_service import MetadataLogStore, MetadataSnapshots, SnapshotId
from kmirror.ports import Clock

log = logging.getLogger(__name__)

R = TypeVar("R")


def _response(result: ControllerResult[R]) -> R:
    """Every controller operation answers: a result without a response is a broken invariant."""
    if result.response is None:
        raise AssertionError(f"controller operation answered nothing ({len(result.records)} records)")
    return result.response

ImageListener = Callable[[MetadataImage | None, MetadataImage], None]


# Past this many partitions asked for by one CreateTopics or CreatePartitions, the controller
# works on a worker thread (`MetadataService._run`).
LARGE_OPERATION_PARTITIONS = 100


def _partitions_asked(counts: Iterable[int | None]) -> int:
    """The partitions a request asks for; nonsense counts are refused by the operation itself."""
    return sum(c for c in counts if isinstance(c, int) and 0 < c)


class MetadataService(QuorumControl, ClusterControl, DelegationTokenControl):
    def __init__(self, config: ServerConfig, store: MetadataLogStore, clock: Clock, rng: Rng) -> None:
        self._config = config
        self._store = store
        self._clock = clock
        self._rng = rng
        self._image = EMPTY_IMAGE
        self._listeners: list[ImageListener] = []
        self._log_lock = asyncio.Lock()
        """One writer of the metadata log at a time (activation and snapshots take it as it is)."""
        self._lock = OperationLock(self._log_lock, lambda: self.active, self._not_controller_message)
        self._started = False
        self.broker_epoch = -1
        self.heartbeats = BrokerHeartbeatManager(int(config.values.get("broker.session.timeout.ms", 9000)))
        self._entries: list[tuple[int, bytes]] = []
        """The stored log from its start offset, served to brokers (Fetch)."""
        self._changed = asyncio.Event()
        self.snapshots = MetadataSnapshots(config, store, clock)
        self.observers = QuorumObservers()
        self.broker_log_dirs: Callable[[str], Sequence[uuid.UUID]] = lambda cluster_id: ()
        """The co-located broker's log directory ids, given the cluster id (set by the node)."""
        self._init_quorum()

    forwarding: Literal[False] = False  # admin writes run here; a broker-only node forwards them instead

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Replay the stored log; with one voter, format it when empty and register this node
        as a broker; with several, join the quorum (`QuorumControl`): the voter elected leader
        formats the log and becomes the active controller."""
        loaded, self._image = self.snapshots.load()
        self._entries = loaded.entries
        if self._image.cluster_id is not None:
            self._check_cluster_id(self._image.cluster_id)
            self._store.bind(self._image.cluster_id, self._config.node_id)
        if len(self._config.controller_quorum_voters) > 1:
            self._join_quorum()
            self._started = True
            return
        async with self._log_lock:
            if self._image.cluster_id is None:
                cluster_id = self._config.cluster_id or self._new_cluster_id()
                self._announce(self._write(self._image, bootstrap_records(cluster_id)))
                self._store.bind(cluster_id, self._config.node_id)
            if self._config.is_broker:
                endpoints = tuple(
                    BrokerEndpoint(lst.name, lst.host, lst.port, 0) for lst in self._config.advertised_listeners
                )
                incarnation = uuid.UUID(int=self._rng.getrandbits(128), version=4)
                result = register_broker(
                    self._image, self._config.node_id, incarnation, endpoints, self._config.broker_rack, self.heartbeats,
                    self.broker_log_dirs(self._image.cluster_id or ""), bool(self._config.unclean_leader_election_enable),
                )
                await self._commit(result.records)
                assert result.response is not None
                self.broker_epoch = result.response
                # the co-located broker has replayed everything: its first heartbeat unfences it
                beat = self._heartbeat_result(self._config.node_id, self.broker_epoch, self._image.offset, False, False)
                await self._commit(beat.records)
        self._started = True

    def _check_cluster_id(self, cluster_id: str) -> None:
        if self._config.cluster_id is not None and self._config.cluster_id != cluster_id:
            raise MetadataOperationError(
                ApiError(
                    ErrorCode.inconsistent_cluster_id,
                    f"cluster.id {self._config.cluster_id} does not match the metadata log's {cluster_id}",
                )
            )

    @property
    def image(self) -> MetadataImage:
        return self._image

    @property
    def config(self) -> ServerConfig:
        return self._config

    @property
    def clock(self) -> Clock:
        return self._clock

    @property
    def metadata_log(self) -> MetadataLogStore:
        return self._store

    @property
    def controller_id(self) -> int:
        """The active controller: this node with one voter, else the quorum's leader (-1 unknown)."""
        return self._config.node_id if self.quorum is None else self.quorum.leader_id

    def subscribe(self, callback: ImageListener) -> Callable[[], None]:
        """`callback(old_image, new_image)` after every change; returns an unsubscribe function."""
        self._listeners.append(callback)
        return lambda: self._listeners.remove(callback) if callback in self._listeners else None

    # -- writing ------------------------------------------------------------------------------

    async def _commit(self, records: Sequence[Record]) -> None:
        """Append `records` and return once they are committed and replayed into the image
        (with one voter: once flushed). Refused unless this controller is the active one."""
        if not self.active:
            raise NotControllerError(self._not_controller_message())
        if records:
            await self._committed(self._write(self._image, records))

    def _write(self, image: MetadataImage, records: Sequence[Record]) -> Written:
        """Encode, append durably and replay `records` onto `image`: no loop state is touched,
        so a large operation runs this on a worker thread (under the lock: single writer)."""
        encoded = [encode(r) for r in records]
        last_offset = self._store.append(encoded, self._epoch())
        return Written(encoded, last_offset, image.apply(records, last_offset), image.offset)

    async def _committed(self, written: Written) -> None:
        if self.quorum is None:
            self._announce(written)
        else:
            await self._replicate(written)

    def _announce(self, written: Written) -> None:
        self._appended(written)
        self._publish(written.image)

    def _appended(self, written: Written) -> None:
        first = written.last_offset - len(written.encoded) + 1
        self._entries.extend((first + i, data) for i, data in enumerate(written.encoded))
        self.snapshots.appended(written.encoded)
        self._wake_fetchers()

    def _wake_fetchers(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def _publish(self, image: MetadataImage) -> None:
        old, self._image = self._image, image
        self._wake_fetchers()
        for listener in list(self._listeners):
            try:
                listener(old, image)
            except Exception:  # a subscriber's bug must not undo a durable change
                log.exception("metadata listener %r failed", listener)

    async def _run(self, op: Callable[[MetadataImage], ControllerResult[R]], *, large: bool = False) -> R:
        """Run `op` and commit its records. A `large` operation (a creation of thousands of
        partitions: placement, encoding and replay take seconds of CPU) computes and writes on a
        worker thread, so the event loop keeps serving every other client meanwhile; the image
        it starts from cannot change under it, as every commit holds the lock."""
        async with self._lock:
            if not large:
                result = op(self._image)
                await self._commit(result.records)
                return _response(result)
            image = self._image
            result, written = await to_the_end(asyncio.to_thread(self._compute_and_write, op, image))
            if written is not None:
                await self._committed(written)
            return _response(result)

    async def snapshot_if_due(self) -> None:
        """A periodic task: snapshot the image when due (`MetadataSnapshots`), under the lock,
        so that the snapshot is of the whole log, and keep in memory only the log from its new
        start. Brokers below it fetch the snapshot (FetchSnapshot)."""
        async with self._log_lock:
            log_start = await self.snapshots.snapshot_if_due(self._image)
        if log_start is not None and self._entries and self._entries[0][0] < log_start:
            del self._entries[: log_start - self._entries[0][0]]

    def _new_cluster_id(self) -> str:
        return random_kafka_uuid(self._rng)

    def _compute_and_write(self, op: Callable[[MetadataImage], ControllerResult[R]],
                           image: MetadataImage) -> tuple[ControllerResult[R], Written | None]:
        result = op(image)
        return result, (self._write(image, result.records) if result.records else None)

    # -- topics -------------------------------------------------------------------------------

    async def create_topics(
        self, topics: Sequence[topic_ops.CreatableTopic], *, validate_only: bool = False
    ) -> list[topic_ops.CreateTopicResult]:
        result: list[topic_ops.CreateTopicResult] = await self._run(
            lambda image: topic_ops.create_topics(image, topics, self._config, self._rng, validate_only=validate_only),
            large=_partitions_asked(max(t.num_partitions, len(t.assignments)) for t in topics) > LARGE_OPERATION_PARTITIONS,
        )
        return result

    async def delete_topics(
        self, names: Sequence[str] = (), topic_ids: Sequence[uuid.UUID] = ()
    ) -> list[topic_ops.DeleteTopicResult]:
        result: list[topic_ops.DeleteTopicResult] = await self._run(
            lambda image: topic_ops.delete_topics(image, names, topic_ids, self._config)
        )
        return result

    async def create_partitions(
        self, topics: Sequence[topic_ops.CreatePartitionsTopic], *, validate_only: bool = False
    ) -> list[topic_ops.CreatePartitionsResult]:
        result: list[topic_ops.CreatePartitionsResult] = await self._run(
            lambda image: topic_ops.create_partitions(image, topics, self._config, self._rng, validate_only=validate_only),
            large=_partitions_asked(t.count for t in topics) > LARGE_OPERATION_PARTITIONS,
        )
        return result

    async def ensure_internal_topic(
        self, name: str, num_partitions: int, replication_factor: int, configs: Mapping[str, str] | None = None
    ) -> TopicImage:
        return await ensure_internal_topic(self, name, num_partitions, replication_factor, configs)

    # -- configs ------------------------------------------------------------------------------

    def describe_configs(self, resource: ConfigResource, keys: Sequence[str] | None = None) -> DescribeConfigsResult:
        return describe_configs(self._image, self._config, resource, keys)

    def _group_bounds(self) -> dict[str, int]:
        """This controller's `group.consumer.{min,max}.*` (GROUP configs must lie within them)."""
        return {key: int(self._config.get(key)) for key in DEFAULT_BOUNDS if key in self._config.values}

    async def incremental_alter_configs(
        self,
        changes: Sequence[tuple[ConfigResource, Sequence[config_ops.AlterableConfig]]],
        *,
        validate_only: bool = False,
    ) -> list[config_ops.AlterConfigsResult]:
        result: list[config_ops.AlterConfigsResult] = await self._run(
            lambda image: config_ops.incremental_alter_configs(image, changes, validate_only=validate_only,
                                                               group_bounds=self._group_bounds())
        )
        return result

    async def alter_configs(
        self,
        changes: Sequence[tuple[ConfigResource, Mapping[str, str | None]]],
        *,
        validate_only: bool = False,
    ) -> list[config_ops.AlterConfigsResult]:
        result: list[config_ops.AlterConfigsResult] = await self._run(
            lambda image: config_ops.alter_configs(image, changes, validate_only=validate_only,
                                                   group_bounds=self._group_bounds())
        )
        return result

    # -- ACLs ---------------------------------------------------------------------------------

    async def create_acls(self, creations: Sequence[acl_ops.AclCreation]) -> list[ApiError]:
        result: list[ApiError] = await self._run(lambda image: acl_ops.create_acls(image, creations, self._rng))
        return result

    async def delete_acls(self, filters: Sequence[acl_ops.AclFilter]) -> list[acl_ops.DeleteAclsResult]:
        result: list[acl_ops.DeleteAclsResult] = await self._run(lambda image: acl_ops.delete_acls(image, filters))
        return result

    def describe_acls(self, acl_filter: acl_ops.AclFilter) -> list[AclBinding] | ApiError:
        err = acl_ops.validate_filter(acl_filter)
        return err if err is not None else acl_ops.describe_acls(self._image, acl_filter)

    # -- SCRAM credentials (KIP-554) ------------------------------------------------------------

    async def alter_user_scram_credentials(
        self, deletions: Sequence[scram_ops.ScramDeletion], upsertions: Sequence[scram_ops.ScramUpsertion]
    ) -> list[scram_ops.ScramAlterationResult]:
        result: list[scram_ops.ScramAlterationResult] = await self._run(
            lambda image: scram_ops.alter_credentials(image, deletions, upsertions))
        return result

    def describe_user_scram_credentials(self, users: Sequence[str] | None) -> list[scram_ops.ScramDescription]:
        return scram_ops.describe_credentials(self._image, users)

    # -- client quotas ------------------------------------------------------------------------

    async def alter_client_quotas(
        self, alterations: Sequence[quota_ops.QuotaAlteration], *, validate_only: bool = False
    ) -> list[ApiError]:
        result: list[ApiError] = await self._run(
            lambda image: quota_ops.alter_client_quotas(image, alterations, validate_only=validate_only))
        return result

    def describe_client_quotas(
        self, components: Sequence[quota_ops.QuotaFilterComponent], strict: bool
    ) -> quota_ops.DescribedQuotas:
        return quota_ops.describe_client_quotas(self._image, components, strict)

    # -- features and mirrors (KIP-1279) -------------------------------------------------------

    async def update_features(
        self, updates: Sequence[mirror_ops.FeatureUpdate], supported: Mapping[str, tuple[int, int]],
        *, validate_only: bool = False,
    ) -> ApiError:
        result: ApiError = await self._run(
            lambda image: mirror_ops.update_features(image, updates, supported, validate_only=validate_only)
        )
        return result

    async def create_mirror(self, name: str, configs: Mapping[str, str | None]) -> ApiError:
        result: ApiError = await self._run(
            lambda image: mirror_ops.create_mirror(image, name, configs, self._config, self._rng))
        return result

    async def set_mirror_source_cluster_id(self, name: str, cluster_id: str) -> ApiError:
        result: ApiError = await self._run(lambda image: mirror_ops.set_source_cluster_id(image, name, cluster_id))
        return result

    async def delete_mirror(
        self, name: str, partition_states: Mapping[str, Iterable[MirrorPartitionState]]
    ) -> ApiError:
        result: ApiError = await self._run(lambda image: mirror_ops.delete_mirror(image, name, partition_states))
        return result

    async def set_mirror_names(self, decisions: Mapping[str, SetMirrorName | Rejected]) -> dict[str, ApiError]:
        result: dict[str, ApiError] = await self._run(lambda image: mirror_ops.set_mirror_names(image, decisions))
        return result

    async def bump_leader_epochs(
        self, bumps: Sequence[mirror_ops.EpochBump], min_producer_id: int = -1
    ) -> list[mirror_ops.EpochBumpResult]:
        result: list[mirror_ops.EpochBumpResult] = await self._run(
            lambda image: mirror_ops.bump_leader_epochs(image, bumps, min_producer_id),
            large=len(bumps) > LARGE_OPERATION_PARTITIONS,  # a failover of thousands of partitions
        )
        return result

    # -- producer ids -------------------------------------------------------------------------

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int = -1) -> tuple[int, int]:
        """A fresh block `(first_producer_id, size)`, durable before it is handed out."""
        response = await self._run(lambda image: allocate_producer_ids(image, broker_id, broker_epoch))
        if isinstance(response, ApiError):
            raise MetadataOperationError(response)
        first, size = response
        return int(first), int(size)

    # -- the metadata log, as the controller serves it to brokers ------------------------------

    @property
    def log_end_offset(self) -> int:
        return self._store.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self._store.log_start_offset

    @property
    def latest_snapshot(self) -> SnapshotId | None:
        return self._store.latest_snapshot

    def read_snapshot(self, snapshot: SnapshotId, position: int, max_bytes: int) -> tuple[int, bytes] | None:
        return self._store.read_snapshot(snapshot, position, max_bytes)

    def observer_fetched(self, replica_id: int, fetch_offset: int) -> None:
        """A broker's fetch of the metadata log (DescribeQuorum reports its position). Only
        registered brokers are tracked, so a client naming made-up ids grows nothing."""
        if replica_id in self._image.brokers:
            self.observers.fetched(replica_id, fetch_offset, self.high_watermark, self._clock.now_ms())

    def read_entries(self, fetch_offset: int, max_records: int = 1000) -> list[tuple[int, bytes]]:
        """Stored `(offset, encoded record)` from `fetch_offset` (offsets are contiguous from
        the log start offset; nothing below it)."""
        if not self._entries or fetch_offset < self._entries[0][0]:
            return []
        start = fetch_offset - self._entries[0][0]
        return self._entries[start : start + max_records]

    def epoch_ranges(self, start: int, end: int) -> list[tuple[int, int, int]]:
        """`(epoch, first offset, end offset)` runs of the stored log over `[start, end)`."""
        return self._store.epoch_ranges(start, end)

    def readable_end(self, voter: bool) -> int:
        """Where the log a fetcher may read ends: a voter replicates all of it (KIP-595), a broker
        only what is committed."""
        return self.log_end_offset if voter else self.high_watermark

    async def wait_for_records(self, fetch_offset: int, max_wait_ms: int, *, voter: bool = False) -> None:
        """Return once the log a fetcher may read (`readable_end`) extends past `fetch_offset`,
        once anything changes for a voter (the high watermark it learns from the answer), or
        after `max_wait_ms` (long poll)."""
        if self.readable_end(voter) > fetch_offset or max_wait_ms <= 0:
            return
        deadline = self._clock.monotonic_ms() + max_wait_ms
        while True:
            try:
                async with asyncio.timeout(max(0, deadline - self._clock.monotonic_ms()) / 1000):
                    await self._changed.wait()
            except TimeoutError:
                return
            if voter or self.high_watermark > fetch_offset:
                return
