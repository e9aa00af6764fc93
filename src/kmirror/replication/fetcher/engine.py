"""The fetch engine: what to fetch next and what a leader's answer does to the local log.

Sans-IO (Kafka `AbstractFetcherThread`'s logic without its thread). The engine keeps one
`PartitionFetchState` per partition, plans requests (`epoch_queries`, `reset_queries`,
`fetch_plan`) that the shell sends through a `LeaderEndPoint`, and applies the answers to
the local replica through the `LocalReplica` port: append (offsets, epochs and bytes kept),
truncate, follow the leader's high watermark and log start offset.

Truncation (KIP-101 and KIP-279, epoch-based truncation): given the leader's (epoch, end offset) for
the follower's last epoch, the follower truncates to min(leader end offset, its own end
offset for that epoch). If the leader answers with an older epoch the follower also has, the
result is only a bound: the follower keeps truncating/fetching with its new latest epoch.
Without any epoch the follower truncates to its high watermark (pre-KIP-101 rule).

Appends (KAFKA-18723, KIP-1279 "Mirror Leader Epoch"): only batches whose partition leader
epoch is at most the bound are appended, the bound being the answer's MirrorLeaderEpoch when
it carries one (a destination follower of a mirror partition, whose batches carry source
epochs unrelated to the local leader epoch), else the request's CurrentLeaderEpoch (none
when -1, as the mirror fetcher sends to the source). A batch above it fails the partition's
fetch like a corrupt one (back off, fetch again); the MirrorLeaderEpoch learned is sent back
in the next request.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

from kmirror.protocol.errors import ErrorCode
from kmirror.records.batch import CorruptRecordError, cut_within_first_batch, iter_batches
from kmirror.replication.fetcher.policy import FetchPolicy
from kmirror.replication.fetcher.state import FetchPhase, PartitionFetchState
from kmirror.replication.fetcher.truncation import accepts_batch, max_batch_epoch
from kmirror.replication.outcomes import EpochEndOffset
from kmirror.replication.replication_quota import ReplicaQuota
from kmirror.types import TopicPartition

# Partitions of a Fetch answer applied per step (`FetchEngine.fetch_response_steps`): the first
# answer for thousands of partitions, where each append may create files, gives the event loop
# back between steps instead of holding it for seconds.
RESPONSE_STEP_PARTITIONS = 100


class LocalReplica(Protocol):
    """The local logs the engine writes (the replica manager's follower partitions)."""

    def log_end_offset(self, tp: TopicPartition) -> int: ...

    def high_watermark(self, tp: TopicPartition) -> int: ...

    def log_start_offset(self, tp: TopicPartition) -> int: ...

    def latest_epoch(self, tp: TopicPartition) -> int | None: ...

    def end_offset_for_epoch(self, tp: TopicPartition, epoch: int) -> tuple[int, int] | None: ...

    def truncate_to(self, tp: TopicPartition, offset: int) -> None: ...

    def truncate_fully_and_start_at(self, tp: TopicPartition, offset: int) -> None: ...

    def append(self, tp: TopicPartition, records: bytes | memoryview) -> ErrorCode:
        """Append as follower; ErrorCode.none on success."""
        ...

    def update_high_watermark(self, tp: TopicPartition, high_watermark: int) -> None: ...

    def maybe_increment_log_start_offset(self, tp: TopicPartition, offset: int) -> None: ...


@dataclass(frozen=True, slots=True)
class FetchedPartition:
    """One partition of a leader's Fetch answer, as the endpoint decoded it."""

    error: ErrorCode
    records: bytes | memoryview = b""
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1
    diverging_epoch: EpochEndOffset | None = None
    mirror_leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchPartitionPlan:
    topic_partition: TopicPartition
    topic_id: UUID
    fetch_offset: int
    current_leader_epoch: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int
    mirror_leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class FetchPlan:
    partitions: tuple[FetchPartitionPlan, ...]
    policy: FetchPolicy


@dataclass(frozen=True, slots=True)
class EpochQuery:
    topic_partition: TopicPartition
    topic_id: UUID
    current_leader_epoch: int
    leader_epoch: int


def truncation_for_leader_epoch_end(leader: EpochEndOffset, log_end_offset: int, high_watermark: int,
                                    local_epoch_end: tuple[int, int] | None) -> tuple[int, bool]:
    """Kafka `getOffsetTruncationState`: where a replica whose latest epoch was answered with
    `leader` (OffsetsForLeaderEpoch) truncates, and whether that ends the truncation.
    `local_epoch_end` is the replica's own (epoch, end offset) for `leader.leader_epoch`.
    Not complete when the replica's entry for that epoch is older than the leader's: it
    asks again with its new latest epoch."""
    if leader.end_offset < 0:
        return high_watermark, True
    if leader.leader_epoch < 0 or local_epoch_end is None:
        return min(leader.end_offset, log_end_offset), True
    return min(local_epoch_end[1], leader.end_offset), local_epoch_end[0] == leader.leader_epoch


class FetchStates(dict[TopicPartition, PartitionFetchState]):
    """The engine's fetch state per partition, with the partitions in the phases a round asks
    the leader about kept aside (TRUNCATING: OffsetsForLeaderEpoch, RESETTING: ListOffsets):
    a round in which every partition fetches sends neither, without looking at each one."""

    def __init__(self) -> None:
        super().__init__()
        self.truncating: set[TopicPartition] = set()
        self.resetting: set[TopicPartition] = set()

    def __setitem__(self, tp: TopicPartition, st: PartitionFetchState) -> None:
        super().__setitem__(tp, st)
        phase = st.phase
        if phase is FetchPhase.TRUNCATING:
            self.truncating.add(tp)
        elif self.truncating:
            self.truncating.discard(tp)
        if phase is FetchPhase.RESETTING:
            self.resetting.add(tp)
        elif self.resetting:
            self.resetting.discard(tp)

    def __delitem__(self, tp: TopicPartition) -> None:
        super().__delitem__(tp)
        self.truncating.discard(tp)
        self.resetting.discard(tp)

    def pop(self, tp: TopicPartition, *default: PartitionFetchState | None) -> PartitionFetchState | None:  # type: ignore[override]
        self.truncating.discard(tp)
        self.resetting.discard(tp)
        return super().pop(tp, *default)


class FetchEngine:
    def __init__(self, local: LocalReplica, policy: FetchPolicy, quota: ReplicaQuota | None = None) -> None:
        self.local = local
        self.policy = policy
        self.quota = quota
        """A replication throttle: throttled partitions sit out a Fetch while it is exceeded."""
        self.states = FetchStates()
        # The last plan entry built for each partition, with the state and log start it was
        # built from: an idle partition's entry is reused round after round (and a fetch
        # session sees it unchanged by identity).
        self._plans: dict[TopicPartition, tuple[PartitionFetchState, int, FetchPartitionPlan]] = {}

    # -- membership ---------------------------------------------------------------------

    def add_partition(self, tp: TopicPartition, topic_id: UUID, leader_epoch: int) -> None:
        """Start (or restart, on a new leader epoch) fetching `tp` from the local LEO."""
        latest = self.local.latest_epoch(tp)
        truncate_first = latest is None or not self.policy.truncate_on_fetch
        self.states[tp] = PartitionFetchState(
            tp,
            topic_id,
            fetch_offset=self.local.log_end_offset(tp),
            current_leader_epoch=leader_epoch,
            last_fetched_epoch=-1 if latest is None else latest,
            phase=FetchPhase.TRUNCATING if truncate_first else FetchPhase.FETCHING,
        )

    def remove_partitions(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self.states.pop(tp, None)
            self._plans.pop(tp, None)

    # -- truncation ---------------------------------------------------------------------

    def epoch_queries(self, now_ms: int) -> list[EpochQuery]:
        """OffsetsForLeaderEpoch to send for TRUNCATING partitions that know an epoch;
        those without one truncate to their HW right here."""
        queries: list[EpochQuery] = []
        if not self.states.truncating:
            return queries
        for tp, st in list(self.states.items()):
            if st.phase is not FetchPhase.TRUNCATING or not st.is_ready(now_ms):
                continue
            latest = self.local.latest_epoch(tp)
            if latest is None:
                self.local.truncate_to(tp, self.local.high_watermark(tp))
                self._fetch_from_log_end(tp, st)
            else:
                queries.append(EpochQuery(tp, st.topic_id, st.current_leader_epoch, latest))
        return queries

    def handle_epoch_end_offsets(
        self, results: Mapping[TopicPartition, EpochEndOffset | ErrorCode], now_ms: int
    ) -> None:
        for tp, result in results.items():
            st = self.states.get(tp)
            if st is None or st.phase is not FetchPhase.TRUNCATING:
                continue
            if isinstance(result, ErrorCode):
                self._on_error(tp, st, result, now_ms)
                continue
            completed = self._truncate(tp, result)
            st = self.states[tp]
            if completed:
                self._fetch_from_log_end(tp, st)
            else:
                latest = self.local.latest_epoch(tp)
                self.states[tp] = st.to(FetchPhase.TRUNCATING, last_fetched_epoch=-1 if latest is None else latest)

    def _truncate(self, tp: TopicPartition, leader: EpochEndOffset) -> bool:
        """Kafka `getOffsetTruncationState`; True when truncation is complete."""
        local_end = self.local.log_end_offset(tp)
        mine = self.local.end_offset_for_epoch(tp, leader.leader_epoch) if leader.leader_epoch >= 0 else None
        offset, completed = truncation_for_leader_epoch_end(leader, local_end, self.local.high_watermark(tp), mine)
        # Also at the log end: the log then drops only epoch entries starting there (Kafka
        # `UnifiedLog.truncateTo`), such as one this broker assigned as a leader that wrote
        # nothing. Kept, it is the last fetched epoch of every fetch, and the leader answers
        # each with the same diverging epoch.
        self.local.truncate_to(tp, offset)
        return completed

    def _fetch_from_log_end(self, tp: TopicPartition, st: PartitionFetchState) -> None:
        latest = self.local.latest_epoch(tp)
        self.states[tp] = st.to(
            FetchPhase.FETCHING,
            fetch_offset=self.local.log_end_offset(tp),
            last_fetched_epoch=-1 if latest is None else latest,
            delay_until_ms=0,
        )

    # -- out of range -------------------------------------------------------------------

    def reset_queries(self, now_ms: int) -> list[EpochQuery]:
        """Partitions whose fetch offset the leader rejected: ask its log start/end offsets
        (`leader_epoch` in the query is unused)."""
        if not self.states.resetting:
            return []
        return [
            EpochQuery(tp, st.topic_id, st.current_leader_epoch, -1)
            for tp, st in self.states.items()
            if st.phase is FetchPhase.RESETTING and st.is_ready(now_ms)
        ]

    def handle_leader_offsets(self, tp: TopicPartition, leader_start: int, leader_end: int) -> None:
        """Kafka `fetchOffsetAndTruncate`: a follower ahead of the leader's LEO truncates to
        it; one behind the leader's log start restarts empty at the log start."""
        st = self.states.get(tp)
        if st is None or st.phase is not FetchPhase.RESETTING:
            return
        local_end = self.local.log_end_offset(tp)
        if leader_end < local_end:
            self.local.truncate_to(tp, leader_end)
        elif leader_start > local_end:
            self.local.truncate_fully_and_start_at(tp, leader_start)
        self._fetch_from_log_end(tp, st)

    # -- fetching -----------------------------------------------------------------------

    def fetch_plan(self, now_ms: int) -> FetchPlan | None:
        """Every partition ready to fetch. A consumer of the leader (the mirror: replica id -1)
        sends log start offset -1 as Kafka's consumers do; only a follower's counts."""
        quota = self.quota
        if quota is not None and quota.is_quota_exceeded(now_ms) and any(map(quota.is_throttled, self.states)):
            # Kafka's fetcher leaves throttled partitions out and backs off when nothing is left
            for tp, st in list(self.states.items()):
                if st.phase is FetchPhase.FETCHING and st.is_ready(now_ms) and quota.is_throttled(tp):
                    self.states[tp] = st.delayed(now_ms + self.policy.backoff_ms)
        follower = self.policy.replica_id >= 0
        plans = self._plans
        parts: list[FetchPartitionPlan] = []
        for tp, st in self.states.items():
            if st.phase is not FetchPhase.FETCHING or st.delay_until_ms > now_ms:
                continue
            log_start = self.local.log_start_offset(tp) if follower else -1
            cached = plans.get(tp)
            if cached is not None and cached[0] is st and cached[1] == log_start:
                parts.append(cached[2])
                continue
            plan = FetchPartitionPlan(
                tp,
                st.topic_id,
                st.fetch_offset,
                st.current_leader_epoch,
                st.last_fetched_epoch if self.policy.truncate_on_fetch else -1,
                log_start,
                self.policy.partition_max_bytes,
                st.mirror_leader_epoch,
            )
            plans[tp] = (st, log_start, plan)
            parts.append(plan)
        return FetchPlan(tuple(parts), self.policy) if parts else None

    def handle_fetch_response(
        self, plan: FetchPlan, results: Mapping[TopicPartition, FetchedPartition], now_ms: int
    ) -> set[TopicPartition]:
        """Apply a Fetch answer at once; returns the partitions whose log or HW changed."""
        changed: set[TopicPartition] = set()
        for step in self.fetch_response_steps(plan, results, now_ms):
            changed |= step
        return changed

    def fetch_response_steps(
        self, plan: FetchPlan, results: Mapping[TopicPartition, FetchedPartition], now_ms: int,
        partitions_per_step: int = RESPONSE_STEP_PARTITIONS,
    ) -> Iterator[set[TopicPartition]]:
        """Apply a Fetch answer `partitions_per_step` partitions at a time, yielding after each
        step the partitions whose log or HW changed in it. The caller may run other work
        between steps: a partition is checked against its fetch state when its turn comes, and
        an answer to a state that changed meanwhile is ignored, as Kafka ignores any stale
        answer.

        Only the first partition with records in the answer may exceed the size limits by
        one batch (Kafka KIP-74); a later one gets what is left of the response's max bytes,
        which can end inside its first batch. Such a cut batch is not appended and is
        fetched again from the same offset. The first partition's records hold at least one
        whole batch, else they are malformed and the append reports it."""
        if not results:
            return
        first_with_records = next(
            (tp for tp, r in results.items() if r.error == ErrorCode.none and len(r.records) > 0), None)
        # An answer in a fetch session lists only partitions with news: walk the answer, not the plan.
        asked_for = {p.topic_partition: p for p in plan.partitions} if len(results) < len(plan.partitions) else None
        order = plan.partitions if asked_for is None else [asked_for[tp] for tp in results if tp in asked_for]
        changed: set[TopicPartition] = set()
        for done, asked in enumerate(order, 1):
            result = results.get(asked.topic_partition)
            if result is not None:
                self._apply(asked, result, asked.topic_partition == first_with_records, now_ms, changed)
            if done % partitions_per_step == 0 and done < len(order):
                yield changed
                changed = set()
        yield changed

    def _apply(self, asked: FetchPartitionPlan, result: FetchedPartition, first_with_records: bool, now_ms: int,
               changed: set[TopicPartition]) -> None:
        """One partition of a Fetch answer."""
        tp = asked.topic_partition
        st = self.states.get(tp)
        # Kafka: ignore answers to a fetch state that changed meanwhile.
        if (
            st is None
            or st.phase is not FetchPhase.FETCHING
            or st.fetch_offset != asked.fetch_offset
            or st.current_leader_epoch != asked.current_leader_epoch
        ):
            return
        if result.mirror_leader_epoch != st.mirror_leader_epoch:
            st = self.states[tp] = st.to(FetchPhase.FETCHING, mirror_leader_epoch=result.mirror_leader_epoch)
        if result.error != ErrorCode.none:
            self._on_error(tp, st, result.error, now_ms)
            return
        if result.diverging_epoch is not None:
            self._truncate(tp, result.diverging_epoch)
            self._fetch_from_log_end(tp, st)
            changed.add(tp)
            return
        bound = max_batch_epoch(asked.current_leader_epoch, result.mirror_leader_epoch)
        if bound >= 0 and len(result.records) > 0 and not _epochs_within(result.records, bound):
            self._on_error(tp, st, ErrorCode.corrupt_message, now_ms)
            return
        if len(result.records) > 0 and not (not first_with_records and cut_within_first_batch(result.records)):
            error = self.local.append(tp, result.records)
            if error != ErrorCode.none:
                self._on_error(tp, st, error, now_ms)
                return
            if self.quota is not None and self.quota.is_throttled(tp):
                self.quota.record(len(result.records), now_ms)
            self._fetch_from_log_end(tp, st)
            changed.add(tp)
        if result.high_watermark >= 0:
            before = self.local.high_watermark(tp)
            self.local.update_high_watermark(tp, result.high_watermark)
            if self.local.high_watermark(tp) != before:
                changed.add(tp)
        if result.log_start_offset >= 0:
            self.local.maybe_increment_log_start_offset(tp, result.log_start_offset)

    def handle_failure(self, tps: Iterable[TopicPartition], now_ms: int) -> None:
        """The request failed as a whole (connection lost, timeout): back off."""
        for tp in tps:
            st = self.states.get(tp)
            if st is not None:
                self.states[tp] = st.delayed(now_ms + self.policy.backoff_ms)

    def _on_error(self, tp: TopicPartition, st: PartitionFetchState, error: ErrorCode, now_ms: int) -> None:
        if error == ErrorCode.offset_out_of_range:
            self.states[tp] = st.to(FetchPhase.RESETTING)
        elif error == ErrorCode.fenced_leader_epoch:
            # Our leader epoch is stale: wait for the image to re-add the partition.
            self.states[tp] = st.to(FetchPhase.FENCED)
        else:
            self.states[tp] = st.delayed(now_ms + self.policy.backoff_ms)

    def next_ready_ms(self) -> int | None:
        """The earliest time a delayed partition becomes ready (None when none is delayed)."""
        delays = [st.delay_until_ms for st in self.states.values() if st.phase is not FetchPhase.FENCED]
        return min(delays) if delays else None


def _epochs_within(records: bytes | memoryview, bound: int) -> bool:
    """Every whole batch's partition leader epoch is within `bound` (any is when `bound` is
    negative: the caller skips the walk). Unreadable bytes pass: the append reports them."""
    try:
        return all(accepts_batch(h.partition_leader_epoch, bound)
                   for _, h in iter_batches(records, allow_truncated_tail=True))
    except CorruptRecordError:
        return True
