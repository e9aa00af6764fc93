"""MirrorManager: the KIP-1279 partition lifecycle on the destination partition leader.

For every partition of a mirror topic this broker leads, `reconcile` asks
`kmirror.kip1279.failover.plan_for(membership, state)` for an ordered plan and executes it
step by step (`kmirror.mirror.plan_steps`, a handler per action); a step that cannot complete yet (source unreachable, replicas not truncated,
leader epoch not bumped yet) ends the run, and the next `reconcile` resumes from the
persisted state. Every state change is persisted through a `MirrorStateStore` port (the
mirror coordinator's WriteMirrorStates; `InMemoryMirrorStateStore` until it is wired) before
the next step. The leader epoch bump goes through a `LeaderEpochBumper` port
(BumpLeaderEpochs to the controller). A run is driven by events: a metadata image
(`on_metadata_change`: a membership change, a bumped epoch), a high watermark move of a
partition waiting on its followers (`on_replica_progress`), and the shell's refresh tick
for everything else that is retried.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from uuid import UUID

from kmirror.config.mirror import SUPPORT_UNCLEAN_LEADER_ELECTION
from kmirror.kip1279 import failover as f
from kmirror.kip1279.membership import (
    MIRROR_NAME_CONFIG,
    Membership,
    MembershipStatus,
    parse_mirror_name_config,
)
from kmirror.kip1279.state import MirrorPartitionState
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.mirrors import mirror as mirror_info
from kmirror.mirror.fetcher.manager import MirrorFetcherManager
from kmirror.mirror.fetcher.source_endpoint import SourceCluster
from kmirror.mirror.leader_log import pid_reset_offset
from kmirror.mirror.led_partition import (
    MirroredPartitionState,
    PartitionDescription,
    describe_partition,
    led_mirror_partitions,
    removed_not_stopped,
)
from kmirror.mirror.lifecycle_ports import (
    Concurrently,
    LeaderEpochBumper,
    MirrorStateStore,
    PartitionKey,
    StepPending,
)
from kmirror.mirror.plan_steps import PlanSteps
from kmirror.mirror.source_topic import SourceTopicCheck, SourceTopicStatus, check_source_topic
from kmirror.ports import Clock
from kmirror.protocol.mirror.find_coordinator import topic_id_string
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.types import TopicPartition

S = MirrorPartitionState
log = logging.getLogger(__name__)


@dataclass
class MirrorManager:
    broker_id: int
    replica_manager: ReplicaManager
    fetchers: MirrorFetcherManager
    store: MirrorStateStore
    bumper: LeaderEpochBumper
    source_for: Callable[[str], SourceCluster | None]
    clock: Clock
    partitions: dict[TopicPartition, MirroredPartitionState] = field(default_factory=dict)
    image: MetadataImage | None = None
    concurrently: Concurrently | None = None
    """Runs the reconciles of one pass together, answering each one's result or exception
    (asyncio.gather with return_exceptions): each partition's plan stays sequential, the
    partitions interleave, so the store and the bumper can batch their requests. None: one
    partition after the other."""

    def __post_init__(self) -> None:
        self.fetchers.local.on_failed = self._on_failed
        self._failed: dict[TopicPartition, str] = {}
        self.source_topic_deleted_partitions = 0
        """Partitions this broker stopped because their source topic was deleted or
        re-created (cumulative; `SourceTopicDeletedPartitionsCount`)."""
        self._warned_gone: set[tuple[str, str, UUID]] = set()
        self._counted_gone: set[PartitionKey] = set()
        self._missing_once: set[PartitionKey] = set()
        self._tp_of_key: dict[PartitionKey, TopicPartition] = {}
        self._pass_views: dict[tuple[str, str, UUID], tuple[SourceTopicCheck | None, str]] | None = None
        """Within one `on_metadata_change` pass: the source's view of each mirrored topic,
        asked once per topic and not once per partition."""
        self._led: tuple[MetadataImage | None, dict[TopicPartition, tuple[str, UUID]]] = (None, {})
        self.awaiting_replicas: set[TopicPartition] = set()
        """Partitions whose plan waits on their followers (replicas truncated, MIRROR_PID_RESET
        committed): `on_replica_progress` resumes them when their high watermark moves."""
        self.steps = PlanSteps(self.broker_id, self.replica_manager, self.fetchers, self.store, self.bumper,
                               self.clock, self.supports_unclean_leader_election, self.awaiting_replicas)

    def supports_unclean_leader_election(self, topic: str) -> bool:
        """The topic's `mirror.support.unclean.leader.election` (KIP-1279, dynamic, default
        false), as the latest metadata has it: LME truncation then waits for every replica."""
        image = self.image
        return image is not None and str(image.topic_config(topic).get(SUPPORT_UNCLEAN_LEADER_ELECTION)).lower() == "true"

    # -- inputs ---------------------------------------------------------------------------

    def _on_failed(self, tp: TopicPartition, message: str) -> None:
        self._failed[tp] = message

    def mirrored_partitions(self, image: MetadataImage) -> dict[TopicPartition, tuple[str, UUID]]:
        """`led_mirror_partitions` of this broker, worked out once per image (callers must not
        change the answer)."""
        if self._led[0] is not image:
            self._led = (image, led_mirror_partitions(image, self.broker_id))
        return self._led[1]

    async def on_metadata_change(self, image: MetadataImage) -> None:
        self.image = image
        led = self.mirrored_partitions(image)
        for tp in list(self.partitions):
            # Resigned, detached, or the topic deleted (and maybe re-created under the same
            # name: another topic id) since the last image: drop the fetcher and the cached
            # state, which belong to the old topic.
            if tp not in led or led[tp][1] != self.partitions[tp].key.topic_id:
                self.fetchers.remove_partition(tp)
                self._tp_of_key.pop(self.partitions.pop(tp).key, None)
                self.awaiting_replicas.discard(tp)
        self._pass_views = {}
        try:
            await self._prepare_pass(led)
            await self._reconcile_all(list(led))
        finally:
            self._pass_views = None

    async def on_replica_progress(self, tps: Iterable[TopicPartition]) -> None:
        """Resume the partitions of `tps` whose plan waits on their followers, on the current
        image: the shell calls this when their high watermark moved (the replica manager's
        append listeners), so a failover's STOPPED follows the followers' acknowledgement of
        MIRROR_PID_RESET instead of the next refresh tick. No source round trip: each
        resumed partition plans with the source's view unknown (None, the answer of an
        unreachable source: nothing starts or stops on the source's word) and the cluster
        id the controller recorded for the mirror. The plans, the states and their order
        are those of a full pass; only partitions that are waiting are touched."""
        woken = [tp for tp in tps if tp in self.awaiting_replicas and tp in self.partitions]
        if not woken or self.image is None:
            return
        self._pass_views = {}
        for tp in woken:
            key = self.partitions[tp].key
            self._pass_views[(key.mirror_name, tp.topic, key.topic_id)] = (
                None, self._recorded_cluster_id(key.mirror_name))
        try:
            await self._reconcile_all(woken)
        finally:
            self._pass_views = None

    async def _reconcile_all(self, tps: list[TopicPartition]) -> None:
        await self._all([self.reconcile(tp) for tp in tps])

    async def _all(self, awaitables: list[Awaitable[object]]) -> None:
        """Together (`concurrently`) or one after the other; raises the first failure."""
        if self.concurrently is None:
            for awaitable in awaitables:
                await awaitable
            return
        for outcome in await self.concurrently(awaitables):
            if isinstance(outcome, BaseException):
                raise outcome

    async def _prepare_pass(self, led: Mapping[TopicPartition, tuple[str, UUID]]) -> None:
        """Once per mirror and per topic, before the partitions: move fetchers to a replaced
        source connection, and ask the source about each mirrored topic not being failed
        over, all topics at once (the answers every partition of the topic then plans with)."""
        seen: set[str] = set()
        views: list[Awaitable[object]] = []
        for topic, value, topic_id in dict.fromkeys((tp.topic, value, topic_id) for tp, (value, topic_id) in led.items()):
            membership = parse_mirror_name_config(value)
            if membership is None:
                continue
            source = self.source_for(membership.mirror_name)
            if source is not None and membership.mirror_name not in seen:
                seen.add(membership.mirror_name)
                await self.fetchers.replace_source(membership.mirror_name, source)
            if membership.status is not MembershipStatus.REMOVED:
                views.append(self._pass_source_view(source, membership.mirror_name, topic, topic_id))
        await self._all(views)

    def failing_over(self, image: MetadataImage) -> bool:
        """A partition led here is removed from its mirror and not known STOPPED yet."""
        return removed_not_stopped(self.mirrored_partitions(image), self.partitions)

    # -- the lifecycle --------------------------------------------------------------------

    async def reconcile(self, tp: TopicPartition) -> MirrorPartitionState | None:
        image = self.image
        topic = image.topics.get(tp.topic) if image is not None else None
        if image is None or topic is None:
            return None
        membership = parse_mirror_name_config(image.topic_config(tp.topic).get(MIRROR_NAME_CONFIG))
        if membership is None:
            return None
        mp = self.partitions.get(tp)
        source = self.source_for(membership.mirror_name)
        self.awaiting_replicas.discard(tp)
        try:
            if mp is None:
                mp = await self._load(tp, PartitionKey(membership.mirror_name, topic.topic_id, tp.partition))
            if tp in self._failed and mp.state in (S.PREPARING, S.MIRRORING):
                # Forgotten only once FAILED is persisted: the fetcher reports a refusal once.
                mp.failure = self._failed[tp]
                await self._execute(tp, mp, (f.TransitionTo(S.FAILED), f.RemoveFetcher()), source)
                del self._failed[tp]
                log.error("Mirror %s partition %s FAILED: %s", membership.mirror_name, tp, mp.failure)
            if source is not None:
                await self.fetchers.replace_source(membership.mirror_name, source)
            if membership.status is MembershipStatus.REMOVED:  # a failover needs nothing of the source
                check, cluster_id = None, self._recorded_cluster_id(membership.mirror_name)
            else:
                check, cluster_id = await self._pass_source_view(source, membership.mirror_name, tp.topic,
                                                                 mp.key.topic_id)
            check = self._confirmed(mp, check)
            self._note_source_topic(tp, mp, check)
            for _ in range(len(S)):  # a plan that ends in a state with a plan of its own goes on
                before = mp.state
                await self._execute(tp, mp, self._plan(tp, mp, membership, cluster_id, check), source)
                if mp.state is before:
                    break
            mp.waiting = None
        except StepPending as pending:
            log.debug("mirror partition %s waits: %s", tp, pending)
            if mp is not None:
                mp.waiting = str(pending)
        return None if mp is None else mp.state

    async def _pass_source_view(self, source: SourceCluster | None, mirror_name: str, topic: str,
                                topic_id: UUID) -> tuple[SourceTopicCheck | None, str]:
        """`_source_view`, asked once per topic in a pass: every partition of the topic gets
        the same answer, as if the source had been asked at the start of the pass (one
        Metadata request instead of one per partition)."""
        if self._pass_views is None:
            return await self._source_view(source, mirror_name, topic, topic_id)
        key = (mirror_name, topic, topic_id)
        view = self._pass_views.get(key)
        if view is None:
            view = self._pass_views[key] = await self._source_view(source, mirror_name, topic, topic_id)
        return view

    async def _source_view(self, source: SourceCluster | None, mirror_name: str, topic: str,
                           topic_id: UUID) -> tuple[SourceTopicCheck | None, str]:
        """(the source topic checked against the mirror's topic id, source cluster id) for the
        plan. An unreachable source must not block a failover (the KIP's disaster case): the
        check is then None (unknown: deletion is acted on only when the source says so) and
        the cluster id is the one the controller recorded for the mirror."""
        if source is None:
            return None, ""
        try:
            return check_source_topic(topic_id, await source.topic_id(topic)), await source.cluster_id()
        except Exception as exc:
            log.debug("mirror %s: source unreachable: %r", mirror_name, exc)
            return None, self._recorded_cluster_id(mirror_name)

    def _recorded_cluster_id(self, mirror_name: str) -> str:
        """The source cluster id the controller recorded for the mirror."""
        info = mirror_info(self.image, mirror_name) if self.image is not None else None
        return "" if info is None else info.source_cluster_id

    def _confirmed(self, mp: MirroredPartitionState, check: SourceTopicCheck | None) -> SourceTopicCheck | None:
        """A name missing from the source's Metadata counts as deleted only when a second
        pass still misses it (None, unknown, the first time): a source broker answering
        before its metadata is loaded must not stop a mirror. Another topic id under the
        name is final at once (a stale view shows the old id, never a new one)."""
        if check is None or check.status is not SourceTopicStatus.DELETED:
            if check is not None:
                self._missing_once.discard(mp.key)
            return check
        if mp.key in self._missing_once:
            return check
        self._missing_once.add(mp.key)
        return None

    def _note_source_topic(self, tp: TopicPartition, mp: MirroredPartitionState, check: SourceTopicCheck | None) -> None:
        """Remember why the source topic is gone (KIP "Topic Deletion"), count the partitions
        stopped for it and log it once per topic: one WARN naming the mirror, the topic, the
        mirror's topic id and the id the source now lists the name with."""
        if check is None:
            return
        if check.same:
            mp.source_topic_gone = None
            return
        mp.source_topic_gone = check.reason(tp.topic)
        if mp.state in (S.PREPARING, S.MIRRORING, S.PAUSING, S.PAUSED) and mp.key not in self._counted_gone:
            self._counted_gone.add(mp.key)
            self.source_topic_deleted_partitions += 1
        key = (mp.key.mirror_name, tp.topic, mp.key.topic_id)
        if key not in self._warned_gone and mp.state is not S.STOPPED:
            self._warned_gone.add(key)
            new_id = "none (deleted)" if check.source_topic_id is None else topic_id_string(check.source_topic_id)
            log.warning("Mirror %s topic %s: source topic deleted or re-created (mirrored topic id %s, source "
                        "topic id now %s); its partitions stop, the destination keeps its data", mp.key.mirror_name,
                        tp.topic, topic_id_string(mp.key.topic_id), new_id)

    def source_topic_deleted(self, mirror_name: str, topic_id: UUID, partition: int) -> bool:
        """The partition is STOPPED because its source topic was deleted or re-created, as
        this leader saw it (KIP: "STOPPED ... The topic becomes writable")."""
        mp = self._by_key(PartitionKey(mirror_name, topic_id, partition))
        return mp is not None and mp.state is S.STOPPED and mp.source_topic_gone is not None

    async def _load(self, tp: TopicPartition, key: PartitionKey) -> MirroredPartitionState:
        """The persisted state, cached only once read: a store that cannot answer (the
        coordinator moving, `__mirror_state` still loading) leaves this partition pending
        and the rest of the pass untouched; never act on a guessed state."""
        try:
            loaded = await self.store.load(key)
        except Exception as exc:
            raise StepPending(f"mirror state not readable: {exc!r}") from exc
        mp = MirroredPartitionState(key)
        if loaded is not None:
            mp.state, mp.last_mirrored_epoch = loaded
        self.partitions[tp] = mp
        self._tp_of_key[key] = tp
        return mp

    def _plan(self, tp: TopicPartition, mp: MirroredPartitionState, membership: Membership, cluster_id: str,
              check: SourceTopicCheck | None) -> tuple[f.Action, ...]:
        removed = membership.status is MembershipStatus.REMOVED
        source_exists = check is None or check.same
        if mp.state in (S.STOPPING, S.FAILED) and (mp.state is S.STOPPING or removed) and self._ends_with_pid_reset(tp, mp):
            return f.detach_resume_plan(mp.state)
        if mp.state is S.STOPPING:  # resume an interrupted failover
            return (*f.stopping_plan(S.MIRRORING, cluster_id)[1:],)
        if mp.state is S.PREPARING and membership.status.value == "" and source_exists:
            return f.preparing_plan(S.UNKNOWN)[1:]  # resume an interrupted start
        if (mp.state is S.MIRRORING and not self.fetchers.is_fetching(tp) and membership.status.value == ""
                and source_exists):
            return (f.StartFetcher(),)
        if mp.state in (S.UNKNOWN, S.STOPPED) and not removed and check is None:
            # Starting (add, restart, failback) truncates on the source's word: only once
            # the source confirms it still holds the mirror's topic id.
            return ()
        return f.plan_for(membership, mp.state, cluster_id, source_topic_exists=source_exists)

    def _ends_with_pid_reset(self, tp: TopicPartition, mp: MirroredPartitionState) -> bool:
        """The detach steps already ran up to MIRROR_PID_RESET (on this leader or on one that
        failed since): the last record of the log is that control record."""
        p = self.replica_manager.get_partition(tp)
        if p is None or not p.is_leader:
            return False
        return pid_reset_offset(p, mp.last_mirrored_epoch) is not None

    async def _execute(self, tp: TopicPartition, mp: MirroredPartitionState, plan: tuple[f.Action, ...],
                       source: SourceCluster | None) -> None:
        for action in plan:
            await self.steps.run(tp, mp, action, source)

    def cached_state(self, mirror_name: str, topic_id: UUID, partition: int) -> MirrorPartitionState | None:
        """The state of a partition this broker leads, as last persisted through the
        coordinator; None when not led here or not read yet (read-only then stays)."""
        mp = self._by_key(PartitionKey(mirror_name, topic_id, partition))
        return None if mp is None else mp.state

    def _by_key(self, key: PartitionKey) -> MirroredPartitionState | None:
        """The cached partition of `key`: produce asks this per request, so it is a lookup
        by the remembered topic partition, a scan only when that misses."""
        tp = self._tp_of_key.get(key)
        mp = None if tp is None else self.partitions.get(tp)
        if mp is not None and mp.key == key:
            return mp
        for tp, mp in self.partitions.items():
            if mp.key == key:
                self._tp_of_key[key] = tp
                return mp
        return None

    # -- DescribeMirrors ------------------------------------------------------------------

    def describe(self, tps: list[TopicPartition] | None = None) -> Mapping[TopicPartition, PartitionDescription]:
        out: dict[TopicPartition, PartitionDescription] = {}
        led = self.partitions
        for tp in led if tps is None else (tp for tp in tps if tp in led):
            p = self.replica_manager.get_partition(tp)
            src = self.fetchers.local.source.get(tp)
            out[tp] = describe_partition(led[tp], -1 if p is None else p.log.log_end_offset,
                                         -1 if src is None else src.high_watermark)
        return out
