"""The steps of a KIP-1279 partition plan, carried out on the destination partition leader.

`kmirror.kip1279.failover.plan_for` answers a plan, a tuple of actions; `PlanSteps.run`
carries out one action, matched on its type (every type of `failover.Action` has its case). A step that cannot
complete yet (no source, the source unreachable, this broker no longer the leader, followers
still truncating, the leader epoch not bumped yet) raises `StepPending`: the plan stops there
and the next reconcile resumes it from the persisted state. A partition whose step waits on
its followers is added to `awaiting_replicas`, so their progress resumes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import assert_never

from kmirror.kip1279 import failover as f
from kmirror.kip1279.state import MirrorPartitionState, transition
from kmirror.log.append_analysis import AppendOrigin
from kmirror.log.outcomes import AppendError
from kmirror.mirror.divergence import resolve_divergence
from kmirror.mirror.fetcher.manager import MirrorFetcherManager
from kmirror.mirror.fetcher.source_endpoint import SourceCluster
from kmirror.mirror.leader_log import assign_bumped_epoch, empty_at, pid_reset_offset
from kmirror.mirror.led_partition import MirroredPartitionState
from kmirror.mirror.lifecycle_ports import LeaderEpochBumper, MirrorStateStore, StepPending
from kmirror.mirror.source_topic import check_source_topic
from kmirror.ports import Clock
from kmirror.records.control import ControlType, build_control_batch
from kmirror.records.mirror_pid_reset import encode_mirror_pid_reset
from kmirror.replication.fetcher.truncation import (
    NO_LAST_MIRRORED_EPOCH,
    ReplicaTruncation,
    TruncateFully,
    last_mirrored_epoch_of,
    lme_truncation,
    truncation_progress,
)
from kmirror.replication.partition import Partition
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.replication.replica_ports import HostedLog
from kmirror.types import TopicPartition

S = MirrorPartitionState


@dataclass
class PlanSteps:
    broker_id: int
    replica_manager: ReplicaManager
    fetchers: MirrorFetcherManager
    store: MirrorStateStore
    bumper: LeaderEpochBumper
    clock: Clock
    supports_unclean_leader_election: Callable[[str], bool]
    """A topic's `mirror.support.unclean.leader.election`."""
    awaiting_replicas: set[TopicPartition]

    async def run(self, tp: TopicPartition, mp: MirroredPartitionState, action: f.Action,
                  source: SourceCluster | None) -> None:
        """The action's step; mypy checks that every action of `f.Action` has one."""
        match action:
            case f.TransitionTo():
                await self.transition_to(mp, action)
            case f.RemoveFetcher():
                self.fetchers.remove_partition(tp)
            case f.StartFetcher():
                await self.start_fetcher(tp, mp, source)
            case f.QueryLastMirroredEpoch():
                await self.query_last_mirrored_epoch(tp, mp, source)
            case f.TruncateByLastMirroredEpoch():
                self.truncate_by_last_mirrored_epoch(tp, mp)
            case f.ResolveDivergence():
                await self.resolve_divergence(tp, mp, source)
            case f.AwaitReplicasTruncated():
                self.await_replicas_truncated(tp)
            case f.TruncateToLastStableOffset():
                self.truncate_to_last_stable_offset(tp)
            case f.PersistLastMirroredEpoch():
                await self.persist_last_mirrored_epoch(tp, mp)
            case f.BumpLeaderEpoch():
                await self.bump_leader_epoch(tp, mp)
            case f.AppendMirrorPidReset():
                self.append_mirror_pid_reset(tp, action)
            case f.AwaitMirrorPidResetCommitted():
                self.await_mirror_pid_reset_committed(tp, mp)
            case f.ClearState():
                await self.store.save(mp.key, None, mp.last_mirrored_epoch)
                mp.state = S.UNKNOWN
            case f.ClearReadOnly():
                pass  # read-only follows the persisted state (`membership.is_read_only`)
            case _:
                assert_never(action)

    def _leader(self, tp: TopicPartition) -> Partition[HostedLog]:
        p = self.replica_manager.get_partition(tp)
        if p is None or not p.is_leader:
            raise StepPending(f"{tp} is not led here")
        return p

    async def transition_to(self, mp: MirroredPartitionState, action: f.TransitionTo) -> None:
        new = transition(mp.state, action.state) if mp.state is not action.state else mp.state
        await self.store.save(mp.key, new, mp.last_mirrored_epoch)
        mp.state = new

    async def start_fetcher(self, tp: TopicPartition, mp: MirroredPartitionState,
                            source: SourceCluster | None) -> None:
        if source is None:
            raise StepPending("no source cluster for the mirror")
        await self.fetchers.add_partition(tp, mp.key.mirror_name, source, mp.key.topic_id)

    async def query_last_mirrored_epoch(self, tp: TopicPartition, mp: MirroredPartitionState,
                                        source: SourceCluster | None) -> None:
        if source is None:
            raise StepPending("no source cluster for the mirror")
        try:
            lme = await source.last_mirrored_epoch(mp.key.mirror_name, tp)
        except Exception as exc:  # unreachable source: never truncate on a guess
            raise StepPending(str(exc)) from exc
        # DescribeMirrors names topics only: the answer counts only if the source still lists
        # the mirror's topic id afterwards (ids are never reused). A re-created source topic
        # (failback to a cluster whose topic was replaced) truncates nothing.
        try:
            check = check_source_topic(mp.key.topic_id, await source.topic_id(tp.topic))
        except Exception as exc:
            raise StepPending(str(exc)) from exc
        if not check.same:
            mp.source_topic_gone = check.reason(tp.topic)
            raise StepPending(mp.source_topic_gone)
        mp.source_supports_last_mirrored_epoch = lme is not None
        mp.last_mirrored_epoch = NO_LAST_MIRRORED_EPOCH if lme is None else lme

    def truncate_by_last_mirrored_epoch(self, tp: TopicPartition, mp: MirroredPartitionState) -> None:
        p = self._leader(tp)
        lme = mp.last_mirrored_epoch if mp.source_supports_last_mirrored_epoch else None
        decision = lme_truncation(lme, p.log.epoch_cache, p.log.log_end_offset)
        if isinstance(decision, TruncateFully):
            if not empty_at(p, decision.start_offset):  # a new empty log is already that
                p.truncate_fully_and_start_at(decision.start_offset)
            p.log.update_high_watermark(decision.start_offset)
        else:
            p.truncate_to(decision.offset)
        mp.truncation_offset = p.log.log_end_offset

    async def resolve_divergence(self, tp: TopicPartition, mp: MirroredPartitionState,
                                 source: SourceCluster | None) -> None:
        if source is None:
            raise StepPending("no source cluster for the mirror")
        await resolve_divergence(tp, mp.key.topic_id, lambda: self._leader(tp), source)

    def await_replicas_truncated(self, tp: TopicPartition) -> None:
        p = self._leader(tp)
        followers = {
            r: ReplicaTruncation(st.log_end_offset, st.log_end_offset >= 0)
            for r in p.replicas if r != self.broker_id and (st := p.replica_state(r)) is not None
        }
        every_replica = self.supports_unclean_leader_election(tp.topic)
        progress = truncation_progress(
            leader_id=self.broker_id, truncation_offset=p.log.log_end_offset, replicas=p.replicas, isr=p.isr,
            min_insync_replicas=p.min_insync_replicas, followers=followers,
            support_unclean_leader_election=every_replica,
        )
        if not progress.complete:
            self.awaiting_replicas.add(tp)
            if progress.pending_replicas:
                reason = f"replicas {sorted(progress.pending_replicas)} still truncating"
                if every_replica:
                    reason += " (mirror.support.unclean.leader.election: every replica joins the ISR first)"
            else:
                reason = f"the ISR {sorted(p.isr)} is below min.insync.replicas={p.min_insync_replicas}"
            raise StepPending(reason)

    def truncate_to_last_stable_offset(self, tp: TopicPartition) -> None:
        p = self._leader(tp)
        if p.log.last_stable_offset < p.log.log_end_offset:
            p.truncate_to(p.log.last_stable_offset)

    async def persist_last_mirrored_epoch(self, tp: TopicPartition, mp: MirroredPartitionState) -> None:
        p = self._leader(tp)
        held = last_mirrored_epoch_of(p.log.epoch_cache, p.log.log_end_offset)
        # A log without mirrored records (lost unflushed after a crash mid-STOPPING) keeps the
        # stored LME, as the coordinator does for -1: the bump must still go above the LME
        # DescribeMirrors reports, or local records would reuse an epoch number the other
        # cluster wrote and failback could not tell them apart.
        mp.last_mirrored_epoch = held if held >= 0 else mp.last_mirrored_epoch
        await self.store.save(mp.key, mp.state, mp.last_mirrored_epoch)

    async def bump_leader_epoch(self, tp: TopicPartition, mp: MirroredPartitionState) -> None:
        p = self._leader(tp)
        wanted = f.bump_min_leader_epoch(mp.last_mirrored_epoch)
        # Before MIRROR_PID_RESET expires them: the producer ids the mirrored log holds.
        min_producer_id = max((e.producer_id for e in p.log.active_producers()), default=-1) + 1
        assign_bumped_epoch(p, wanted)  # a bump whose image arrived after the last pass
        if not self._bumped(p, wanted, min_producer_id):
            await self.bumper.bump(tp, mp.key.topic_id, wanted, min_producer_id or -1)
            p = self._leader(tp)
            assign_bumped_epoch(p, wanted)
            if not self._bumped(p, wanted, min_producer_id):
                raise StepPending(f"waiting for leader epoch >= {wanted} and producer ids >= {min_producer_id}")

    def _bumped(self, p: Partition[HostedLog], min_leader_epoch: int, min_producer_id: int) -> bool:
        floor = self.bumper.producer_id_floor()
        return (p.leader_epoch >= min_leader_epoch and p.log.latest_epoch == p.leader_epoch
                and floor >= min_producer_id)

    def append_mirror_pid_reset(self, tp: TopicPartition, action: f.AppendMirrorPidReset) -> None:
        p = self._leader(tp)
        batch = build_control_batch(ControlType.MIRROR_PID_RESET, -1, -1, self.clock.now_ms(),
                                    value=encode_mirror_pid_reset(action.source_cluster_id))
        # Written by the broker itself (Kafka's coordinator origin: control records allowed),
        # as leader in the bumped epoch.
        result = p.log.append_as_leader(batch, p.leader_epoch, self.clock.now_ms(), origin=AppendOrigin.COORDINATOR)
        if isinstance(result, AppendError):
            raise StepPending(f"MIRROR_PID_RESET append failed: {result.message}")
        p.maybe_increment_high_watermark()

    def await_mirror_pid_reset_committed(self, tp: TopicPartition, mp: MirroredPartitionState) -> None:
        p = self._leader(tp)
        offset = pid_reset_offset(p, mp.last_mirrored_epoch)
        if offset is None:
            raise StepPending("MIRROR_PID_RESET is not the last record of the log")
        if p.log.high_watermark <= offset:
            self.awaiting_replicas.add(tp)
            raise StepPending(f"MIRROR_PID_RESET at {offset} not committed (high watermark {p.log.high_watermark})")
