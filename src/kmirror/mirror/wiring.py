"""The mirror data plane of one broker: the `MirrorManager` and the adapters it runs on.

`MirrorDataPlane` is the asyncio shell the node starts: it builds the mirror fetchers
(`mirror.num.replica.fetchers` per source broker and mirror), the `MirrorManager` and its
ports, and runs the manager on one task so partition plans never interleave:
- every metadata image the node applies (`on_metadata_change`, synchronous, never blocks);
- every `mirror.metadata.refresh.interval.ms` (a retry tick: partitions waiting for their
  source leader are re-assigned with fresh source metadata, pending plan steps resume, a
  partition whose batch was refused moves to FAILED); the source high watermark of PAUSING
  and PAUSED partitions is read then too, so their lag (DescribeMirrors, ConsumerLag) grows
  while the source is written.
`sync_errors` holds the KIP's MirrorMetadataManager sync error counts of this broker.
Each pass first checks the source cluster id of every mirror this broker leads partitions of
(`SourceClusterIdGuard`: a mirror whose source reports another cluster id fetches nothing
here). After each full pass, a task of its own runs `metadata_sync.run_once()` (the periodic
MirrorMetadataManager sync of the mirrors this broker coordinates for metadata: topics,
consumer group offsets, ACLs), so the sync's source round trips never hold up a pass. A
source that stops answering holds a pass up only briefly when the operator waits for
something: a newer image, or partitions to fail over (`kmirror.mirror.source_waits`).

Ports:
- `CoordinatorStateStore`: `MirrorStateStore` over the `MirrorCoordinatorService` (the
  coordinator's transition table and routing apply); coordinator errors leave the step
  pending.
- `ControllerEpochBumper`: BumpLeaderEpochs (key 105) through the local controller on a
  combined node, else forwarded to the controller.
- `ImageSourceClusters` (`kmirror.mirror.source_clusters`): `source_for(mirror)` from the
  mirror's configs in the image.
The state store, the bumper and the source clusters batch the requests of one pass
(`kmirror.mirror.coalescer`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, TypeVar
from uuid import UUID

from kio.static.primitive import i32, i64

from kmirror.config.mirror import MIRROR_STATE_TOPIC, REQUEST_TIMEOUT_MS
from kmirror.config.server import ServerConfig
from kmirror.kip1279.membership import MembershipStatus, parse_mirror_name_config
from kmirror.kip1279.state import MirrorPartitionState
from kmirror.metadata.broker_service import BrokerMetadataService
from kmirror.metadata.controller.mirrors import EpochBump
from kmirror.metadata.controller_service import MetadataService
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.mirrors import mirror as mirror_info
from kmirror.mirror.coalescer import Coalescer, Gate
from kmirror.mirror.coordinator.coordinator import PartitionStateResult, StatesResult, StateWrite
from kmirror.mirror.coordinator.records import MirrorPartitionKey
from kmirror.mirror.fetcher.local_replica import MirrorLocalReplica
from kmirror.mirror.fetcher.manager import MirrorFetcherManager
from kmirror.mirror.fetcher.policy import mirror_fetch_policy
from kmirror.mirror.fetcher.source_endpoint import SourceCluster
from kmirror.mirror.fetcher.throttle import mirror_replication_quota, update_mirror_replication_quota
from kmirror.mirror.lifecycle_ports import Concurrently, InMemoryMirrorStateStore, PartitionKey, StepPending
from kmirror.mirror.manager import MirrorManager
from kmirror.mirror.metadata_sync import MetadataSync
from kmirror.mirror.metadata_sync.acls import AclSync, ManagedAclStore
from kmirror.mirror.metadata_sync.admins import SyncAdmins, client_admin
from kmirror.mirror.metadata_sync.auto_add import TopicAutoAdd
from kmirror.mirror.metadata_sync.cluster_id import SourceClusterIdGuard
from kmirror.mirror.metadata_sync.destination import ControllerTopicMetadataWriter
from kmirror.mirror.metadata_sync.groups import DEFAULT_OFFSETS_RETENTION_MS, GroupOffsetSync
from kmirror.mirror.metadata_sync.topics import TopicMetadataSync
from kmirror.mirror.service import MirrorCoordinatorService
from kmirror.mirror.source_clusters import ImageSourceClusters, SourceFactory, client_source_cluster
from kmirror.mirror.source_lookup import admin_source_lookup
from kmirror.mirror.source_waits import SourceWaits
from kmirror.mirror.sync_errors import MirrorSyncErrors
from kmirror.ports import Clock
from kmirror.protocol.errors import ErrorCode
from kmirror.protocol.mirror import bump_leader_epochs as schema
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.types import TopicPartition

log = logging.getLogger(__name__)

DEFAULT_REFRESH_INTERVAL_MS = 1000
_WAIT_ERRORS = frozenset({ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available})


T = TypeVar("T")


class MirrorStatesService(Protocol):
    """The part of `MirrorCoordinatorService` the store uses: reads and writes routed to each
    key's coordinator, answered per key in request order."""

    async def read_state_results(self, keys: Sequence[MirrorPartitionKey]) -> StatesResult: ...

    async def write_states(self, writes: Sequence[StateWrite]) -> StatesResult: ...


class CoordinatorStateStore:
    """`MirrorStateStore` over a `MirrorCoordinatorService` (routing to the key's coordinator,
    persisted in `__mirror_state`, transition table enforced there). Coordinator errors
    (NOT_COORDINATOR, LOAD_IN_PROGRESS, NOT_AVAILABLE, INVALID_REQUEST) leave the step
    pending. Before `__mirror_state` exists no state can exist: a read is UNKNOWN (the first
    write creates the topic). Without a service (tests, a node without one) states are kept
    in memory."""

    def __init__(self, service: MirrorStatesService | None, topic_name_of: Callable[[UUID], str | None],
                 state_topic_exists: Callable[[], bool] = lambda: True, gate: Gate | None = None) -> None:
        self.service = service
        self.topic_name_of = topic_name_of
        self.state_topic_exists = state_topic_exists
        self.local = InMemoryMirrorStateStore()
        self.reads: Coalescer[MirrorPartitionKey, PartitionStateResult] = Coalescer(self._read_batch, gate)
        self.writes: Coalescer[StateWrite, PartitionStateResult] = Coalescer(self._write_batch, gate)

    def _service(self) -> MirrorStatesService:
        if self.service is None:  # without a service, states are kept in `local`
            raise RuntimeError("no MirrorCoordinatorService to send mirror states to")
        return self.service

    async def _read_batch(self, keys: list[MirrorPartitionKey]) -> Sequence[PartitionStateResult]:
        return (await self._service().read_state_results(keys)).partitions

    async def _write_batch(self, writes: list[StateWrite]) -> Sequence[PartitionStateResult]:
        return (await self._service().write_states(writes)).partitions

    async def load(self, key: PartitionKey) -> tuple[MirrorPartitionState, int] | None:
        if self.service is None:
            return await self.local.load(key)
        if not self.state_topic_exists():
            return None
        ckey = MirrorPartitionKey(key.mirror_name, key.topic_id, key.partition)
        result = await self.reads.submit(ckey)
        if result.error is not ErrorCode.none:
            raise StepPending(f"ReadMirrorStates {ckey}: {result.error.name}")
        if result.state is MirrorPartitionState.UNKNOWN:
            return None
        return result.state, result.last_mirrored_epoch

    async def save(self, key: PartitionKey, state: MirrorPartitionState | None, last_mirrored_epoch: int) -> None:
        if self.service is None:
            await self.local.save(key, state, last_mirrored_epoch)
            return
        ckey = MirrorPartitionKey(key.mirror_name, key.topic_id, key.partition)
        # None clears this partition only (UNKNOWN written: a tombstone at its coordinator);
        # the topic's other partitions keep their states and LMEs.
        topic = self.topic_name_of(key.topic_id) or ""
        partition = await self.writes.submit(StateWrite(
            ckey, topic, MirrorPartitionState.UNKNOWN if state is None else state, last_mirrored_epoch))
        if partition.error is not ErrorCode.none:
            raise StepPending(f"WriteMirrorStates {ckey} -> {state.name if state else 'tombstone'}: "
                              f"{partition.error.name} {partition.message or ''}")


class ControllerEpochBumper:
    """`LeaderEpochBumper`: BumpLeaderEpochs to the controller. The new epoch arrives with a
    later metadata image; failures are logged and the manager's step stays pending."""

    def __init__(self, metadata: MetadataService | BrokerMetadataService, gate: Gate | None = None) -> None:
        self.metadata = metadata
        self.bumps: Coalescer[tuple[TopicPartition, EpochBump, int], None] = Coalescer(self._bump_batch, gate)

    async def bump(self, tp: TopicPartition, topic_id: UUID, min_leader_epoch: int, min_producer_id: int = -1) -> None:
        """Partitions bumping together share one BumpLeaderEpochs (one controller batch of
        PartitionChange records); its producer id floor is the highest one asked, which
        fences every partition's mirrored producer ids."""
        await self.bumps.submit((tp, EpochBump(topic_id, tp.partition, min_leader_epoch), min_producer_id))

    async def _bump_batch(self, items: list[tuple[TopicPartition, EpochBump, int]]) -> list[None]:
        bumps = [bump for _, bump, _ in items]
        min_producer_id = max((m for _, _, m in items), default=-1)
        names = {(b.topic_id, b.partition): tp for tp, b, _ in items}
        metadata = self.metadata
        try:
            if not metadata.forwarding:
                results = await metadata.bump_leader_epochs(bumps, min_producer_id)
                for r in results:
                    if r.error.code != ErrorCode.none:
                        log.warning("BumpLeaderEpochs %s: %s", names.get((r.topic_id, r.partition), r), r.error)
            else:
                await metadata.forward(bump_leader_epochs_request(bumps, min_producer_id))
        except Exception as exc:  # controller unreachable or the RPC not served: retried on the next tick
            log.warning("BumpLeaderEpochs of %d partition(s) (%s...) failed: %s", len(items), items[0][0], exc)
        return [None] * len(items)


    def producer_id_floor(self) -> int:
        return self.metadata.image.producer_id_floor


def bump_leader_epochs_request(bumps: Sequence[EpochBump], min_producer_id: int = -1) -> schema.BumpLeaderEpochsRequest:
    """One BumpLeaderEpochs for every bump, grouped by topic id."""
    by_topic: dict[UUID, list[EpochBump]] = {}
    for bump in bumps:
        by_topic.setdefault(bump.topic_id, []).append(bump)
    return schema.BumpLeaderEpochsRequest(topics=tuple(
        schema.TopicState(topic_id=topic_id, partitions=tuple(
            schema.LeaderEpochState(partition_index=i32(b.partition), min_leader_epoch=i32(b.min_leader_epoch))
            for b in group))
        for topic_id, group in by_topic.items()), min_producer_id=i64(min_producer_id))


STAGGER = 500
"""A pass starts its partitions' reconciles this many at a time, one loop iteration apart: run
all at once, a pass over 10,000 caught-up partitions held the event loop for 150-250 ms in one
step, with nothing fetched or served meanwhile. The state store's and the bumper's coalescers
wait for the last chunk (`Gate`), so the pass's partitions still share one request per step."""


def staggered(gate: Gate) -> Concurrently:
    async def gather(awaitables: Sequence[Awaitable[T]]) -> Sequence[T | BaseException]:
        started: list[asyncio.Future[T]] = []
        with gate.closed():
            for i, awaitable in enumerate(awaitables, 1):
                started.append(asyncio.ensure_future(awaitable))
                if i % STAGGER == 0:
                    await asyncio.sleep(0)
            await asyncio.sleep(0)  # the last chunk's first steps, behind the gate too
        return await asyncio.gather(*started, return_exceptions=True)
    return gather


class MirrorDataPlane:
    def __init__(self, broker_id: int, config: ServerConfig | None, clock: Clock, replica_manager: ReplicaManager,
                 metadata: MetadataService | BrokerMetadataService,
                 coordinator_service: MirrorCoordinatorService | None = None, *,
                 source_factory: SourceFactory | None = None) -> None:
        """No I/O: `start` runs it."""
        self.metadata = metadata
        self.replica_manager = replica_manager
        self.clock = clock
        self.refresh_interval_ms = (DEFAULT_REFRESH_INTERVAL_MS if config is None
                                    else int(config.get("mirror.metadata.refresh.interval.ms")))
        self.sync_errors = MirrorSyncErrors()
        self.replication_quota = mirror_replication_quota(broker_id, config, clock)
        self._static_throttle_rate = self.replication_quota.rate
        fetchers = MirrorFetcherManager(
            broker_id, MirrorLocalReplica(replica_manager), mirror_fetch_policy(config), clock,
            num_fetchers=1 if config is None else int(config.get("mirror.num.replica.fetchers")), sync_errors=self.sync_errors,
            quota=self.replication_quota)
        gate = Gate()
        together = staggered(gate)
        self.source_waits = SourceWaits()
        timeout_ms = 30_000 if config is None else int(config.get(REQUEST_TIMEOUT_MS))
        self.sources = ImageSourceClusters(
            broker_id, lambda: self.manager.image or metadata.image,
            source_factory or functools.partial(client_source_cluster, request_timeout_ms=timeout_ms), self.source_waits)
        self.manager = MirrorManager(
            broker_id, replica_manager, fetchers,
            CoordinatorStateStore(coordinator_service, self._topic_name_of, self._state_topic_exists, gate),
            ControllerEpochBumper(metadata, gate), self._source_for, clock,
            concurrently=together,
        )
        self.cluster_ids = SourceClusterIdGuard(self._recorded_cluster_id, self.sources, together)
        lookup = admin_source_lookup if coordinator_service is None else coordinator_service.describe_source_topics
        current_image = lambda: self.manager.image or metadata.image  # noqa: E731
        admins = self.sync_admins = SyncAdmins(
            broker_id, current_image, None if config is None else config.inter_broker_listener_name, "metadata-sync",
            functools.partial(client_admin, request_timeout_ms=timeout_ms))
        self.metadata_sync = MetadataSync([
            TopicAutoAdd(broker_id, current_image, admins, self.sync_errors, self.cluster_ids.is_halted),
            TopicMetadataSync(broker_id, current_image, lookup, ControllerTopicMetadataWriter(metadata),
                              self.sync_errors),
            GroupOffsetSync(broker_id, current_image, admins, self.sync_errors, self.cluster_ids.is_halted,
                            clock=clock,
                            recommit_after_ms=(DEFAULT_OFFSETS_RETENTION_MS if config is None
                                               else int(config.get("offsets.retention.minutes")) * 60_000) // 2),
            AclSync(broker_id, current_image, admins, self.sync_errors, self.cluster_ids.is_halted,
                    store=ManagedAclStore(coordinator_service)),
        ])
        self._latest: MetadataImage | None = None
        self._progressed: set[TopicPartition] = set()
        self._wake = asyncio.Event()
        self._in_pass = False
        self._task: asyncio.Task[None] | None = None
        self._sync_wake = asyncio.Event()
        self._sync_task: asyncio.Task[None] | None = None

    def _topic_name_of(self, topic_id: UUID) -> str | None:
        image = self.manager.image or self.metadata.image
        topic = image.topics_by_id.get(topic_id) if image is not None else None
        return None if topic is None else str(topic.name)

    def _source_for(self, mirror_name: str) -> SourceCluster | None:
        """No source while the mirror's source cluster id mismatches: nothing starts fetching."""
        return None if self.cluster_ids.is_halted(mirror_name) else self.sources(mirror_name)

    def _recorded_cluster_id(self, mirror_name: str) -> str:
        info = mirror_info(self.manager.image or self.metadata.image, mirror_name)
        return "" if info is None else info.source_cluster_id

    async def _halt_mismatched_sources(self, image: MetadataImage) -> None:
        """The cluster id check of every mirror that may fetch here: not of one whose every
        partition led here is removed (failing over needs nothing of the source, and through
        a black hole each check would hold the failover's pass)."""
        values = {value for value, _ in self.manager.mirrored_partitions(image).values()}
        memberships = [m for m in map(parse_mirror_name_config, values) if m is not None]
        await self.cluster_ids.check({m.mirror_name for m in memberships if m.status is not MembershipStatus.REMOVED})
        for tp, mp in list(self.manager.fetchers.partitions.items()):
            if self.cluster_ids.is_halted(mp.mirror_name):
                self.manager.fetchers.remove_partition(tp)

    def _state_topic_exists(self) -> bool:
        image = self.manager.image or self.metadata.image
        return image is not None and MIRROR_STATE_TOPIC in image.topics

    def on_metadata_change(self, image: MetadataImage | None) -> None:
        """Called by the node with every applied image; the run happens on the plane's task."""
        self._latest = image
        if image is not None:
            update_mirror_replication_quota(self.replication_quota, image, self._static_throttle_rate)
        if self._in_pass:
            self.source_waits.newer_image()  # the running pass stops waiting on the source soon
        self._wake.set()

    async def run_once(self) -> None:
        """One pass: apply the newest image (or re-run the current one), retry pending fetchers.
        A pass with partitions to fail over waits on the source only briefly (`SourceWaits`)."""
        image = self._latest if self._latest is not None else self.metadata.image
        self._latest = None
        self.source_waits.start_pass(image is not None and self.manager.failing_over(image))
        self._in_pass = True
        try:
            if image is not None:
                await self._halt_mismatched_sources(image)
            await self.manager.fetchers.retry_pending()
            await self.manager.on_metadata_change(image)
            await self.manager.fetchers.refresh_source_offsets(self._not_fetched())
            await self.sources.close_retired(self._fetches_through)
        finally:
            self._in_pass = False

    def _fetches_through(self, source: SourceCluster) -> bool:
        return any(mp.source is source for mp in self.manager.fetchers.partitions.values())

    def _not_fetched(self) -> dict[TopicPartition, tuple[str, SourceCluster]]:
        out: dict[TopicPartition, tuple[str, SourceCluster]] = {}
        for tp, mp in self.manager.partitions.items():
            if mp.state in (MirrorPartitionState.PAUSING, MirrorPartitionState.PAUSED):
                source = self.sources(mp.key.mirror_name)
                if source is not None:
                    out[tp] = (mp.key.mirror_name, source)
        return out

    def _on_partition_progress(self, tp: TopicPartition) -> None:
        """The replica manager's append listener (a partition grew or its high watermark
        moved): a partition whose plan waits on its followers is resumed now."""
        if tp in self.manager.awaiting_replicas:
            self._progressed.add(tp)
            self._wake.set()

    def start(self) -> None:
        self.manager.fetchers.start()
        self.replica_manager.add_append_listener(self._on_partition_progress)
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._sync_task = asyncio.get_running_loop().create_task(self._sync())

    async def _run(self) -> None:
        """A full pass on every image and every refresh interval; between them, a pass over
        only the partitions whose followers progressed (`MirrorManager.on_replica_progress`).
        Everything runs on this one task, so partition plans never interleave."""
        clock = self.clock
        next_full_ms = clock.monotonic_ms() + self.refresh_interval_ms
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0, next_full_ms - clock.monotonic_ms()) / 1000):
                    await self._wake.wait()
            self._wake.clear()
            progressed, self._progressed = self._progressed, set()
            try:
                if self._latest is None and progressed and clock.monotonic_ms() < next_full_ms:
                    await self.manager.on_replica_progress(progressed)
                else:
                    next_full_ms = clock.monotonic_ms() + self.refresh_interval_ms
                    await self.run_once()
                    self._sync_wake.set()
            except Exception:
                log.exception("mirror data plane pass failed")

    async def _sync(self) -> None:
        """The metadata sync after each full pass, on a task of its own: its round trips to
        the source (configs, group offsets, ACLs) never delay the partitions' lifecycle, a
        failover least of all. A pass that ends while a sync runs wakes the next one."""
        while True:
            await self._sync_wake.wait()
            self._sync_wake.clear()
            await self.metadata_sync.run_once()  # logs and counts each syncer's failure

    async def stop(self) -> None:
        self.replica_manager.remove_append_listener(self._on_partition_progress)
        for task in (self._task, self._sync_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._sync_task = None
        await self.manager.fetchers.stop()
        await self.sources.close()
        await self.metadata_sync.close()
