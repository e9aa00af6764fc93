"""The sans-IO classic group coordinator (Kafka `GroupMetadataManager`, classic part).

Events in: join, sync, heartbeat, leave, offset commit/fetch/delete, list, describe,
delete groups, partition load/unload, append completions and `poll(now_ms)` for expired
deadlines (sessions, rebalances, and each loaded partition's offset expiration check,
`kmirror.coordinator.offsets.expiration`). Values out: `GroupOutput` (responses by request id + records to append). Deadlines
are monotonic ms from the `Clock` port; the shell asks `next_deadline_ms()` and calls
`poll` when it passes. Member ids come from the `new_uuid` port.

A group lives in partition `partition_for(group_id)` of `__consumer_offsets`; this node
coordinates it only while it leads that partition and has loaded it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

from kmirror.coordinator.config import CoordinatorConfig
from kmirror.coordinator.consumer_group import classic_join, classic_members, coexistence, membership
from kmirror.coordinator.consumer_group import replay as consumer_replay
from kmirror.coordinator.consumer_group.group import ConsumerGroup
from kmirror.coordinator.consumer_group.ports import TopicsView
from kmirror.coordinator.group import expiry, static_members, sync_group
from kmirror.coordinator.group.group import ClassicGroup, OffsetAndMetadata
from kmirror.coordinator.group.member import MemberMetadata, Protocol
from kmirror.coordinator.group.sensors import GroupCoordinatorSensors
from kmirror.coordinator.group.state import GroupState
from kmirror.coordinator.group.static_rejoin import rejoin_static
from kmirror.coordinator.offsets import deleted_topics, expiration, replay
from kmirror.coordinator.offsets.partitioner import partition_for
from kmirror.coordinator.partition_status import PartitionStatus, partition_coordinator_error
from kmirror.coordinator.results import (
    Append,
    GroupOutput,
    JoinMember,
    JoinResult,
    LeaveMemberResult,
    LeaveResult,
    SyncResult,
)
from kmirror.coordinator.share_group import heartbeat as share_heartbeat
from kmirror.coordinator.share_group import loading as share_loading
from kmirror.coordinator.share_group.group import ShareGroup
from kmirror.coordinator.share_group.state_records import ShareSnapshot, ShareStateKey
from kmirror.ports import Clock
from kmirror.protocol.errors import ErrorCode
from kmirror.types import TopicPartition

E = ErrorCode


@dataclass
class _Waiting:
    """Responses (and effects) held until an append is reported."""

    on_success: Callable[[], GroupOutput]
    on_failure: Callable[[ErrorCode], GroupOutput]


@dataclass
class CoreState:
    groups: dict[str, ClassicGroup] = field(default_factory=dict)
    # KIP-848 consumer groups; a group id is in `groups` or here, never both
    consumer_groups: dict[str, ConsumerGroup] = field(default_factory=dict)
    # KIP-932 share groups (`kmirror.coordinator.share_group`); a group id is in one of the three maps only
    share_groups: dict[str, ShareGroup] = field(default_factory=dict)
    # share partition states of the loaded partitions (`share_group.state_store`)
    share_states: dict[ShareStateKey, ShareSnapshot] = field(default_factory=dict)
    partitions: dict[int, PartitionStatus] = field(default_factory=dict)
    # (group id, member id) -> request id of the JoinGroup / SyncGroup waiting on a rebalance.
    pending_joins: dict[tuple[str, str], int] = field(default_factory=dict)
    pending_syncs: dict[tuple[str, str], int] = field(default_factory=dict)
    # group id -> producer id -> offsets committed in that producer's open transaction
    # (TxnOffsetCommit), held until its marker (`kmirror.coordinator.offsets.txn_commits`).
    pending_txn_offsets: dict[str, dict[int, dict[TopicPartition, OffsetAndMetadata]]] = field(default_factory=dict)
    # loaded partition -> monotonic deadline of its next offset expiration check (`offsets.expiration`)
    offsets_expiration_deadline_ms: dict[int, int] = field(default_factory=dict)


class GroupCoordinator:
    def __init__(self, config: CoordinatorConfig, clock: Clock, new_uuid: Callable[[], str],
                 topics: Callable[[], TopicsView] = dict) -> None:
        self.config = config
        self.clock = clock
        self._new_uuid = new_uuid
        self._topics = topics
        self.state = CoreState()
        self.sensors = GroupCoordinatorSensors(clock)
        self._waiting: dict[int, _Waiting] = {}
        self._next_ticket = 0

    # ---- ownership -------------------------------------------------------------------

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        return self.state.groups

    @property
    def consumer_groups(self) -> dict[str, ConsumerGroup]:
        return self.state.consumer_groups

    @property
    def share_groups(self) -> dict[str, ShareGroup]:
        return self.state.share_groups

    @property
    def share_states(self) -> dict[ShareStateKey, ShareSnapshot]:
        return self.state.share_states

    def new_uuid(self) -> str:
        return self._new_uuid()

    def topics(self) -> TopicsView:
        """The cluster's topics now, from the `topics` port (the broker's metadata image)."""
        return self._topics()

    def fail_classic_waiters(self, group: ClassicGroup, error: ErrorCode) -> GroupOutput:
        return sync_group.fail_waiters(self, group, error)

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.config.offsets_topic_num_partitions)

    def coordinator_error(self, group_id: str) -> ErrorCode | None:
        """NOT_COORDINATOR unless this node leads the group's partition; LOAD_IN_PROGRESS
        while it replays it (Kafka `GroupCoordinatorService` / `CoordinatorRuntime`)."""
        return partition_coordinator_error(self.state.partitions, self.partition_for(group_id))

    def begin_load(self, partition: int) -> None:
        self.state.partitions[partition] = PartitionStatus.LOADING

    def complete_load(self, partition: int, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Rebuild the partition's groups and offsets by replaying its records in order."""
        now = self.clock.monotonic_ms()
        records = list(records)
        groups = replay.replay(records, now_wall_ms=self.clock.now_ms())
        consumer_groups = consumer_replay.replay(records)
        share_loading.load_partition(self.state.share_groups, self.state.share_states, records, self.topics(),
                                     now + self.config.group_share_session_timeout_ms)
        coexistence.merge_loaded(groups, consumer_groups)
        for consumer_group in consumer_groups.values():
            for member_id in consumer_group.members:
                consumer_group.session_deadline_ms[member_id] = now + self.config.group_consumer_session_timeout_ms
            self.state.consumer_groups[consumer_group.group_id] = consumer_group
        for group in groups.values():
            for member in group.members.values():
                group.heartbeat_deadline_ms[member.member_id] = now + member.session_timeout_ms
            self.state.groups[group.group_id] = group
        self.state.partitions[partition] = PartitionStatus.LOADED
        self.state.offsets_expiration_deadline_ms[partition] = now + self.config.offsets_retention_check_interval_ms

    def unload(self, partition: int) -> GroupOutput:
        """This node no longer leads the partition: its groups go Dead and waiters learn
        NOT_COORDINATOR so clients rediscover the coordinator."""
        out = GroupOutput()
        self.state.partitions.pop(partition, None)
        self.state.offsets_expiration_deadline_ms.pop(partition, None)
        for group_id in [g for g in self.state.consumer_groups if self.partition_for(g) == partition]:
            del self.state.consumer_groups[group_id]
        share_loading.unload_partition(self.state.share_groups, self.state.share_states,
                                       lambda group_id: self.partition_for(group_id) == partition)
        for group_id in [g for g in self.state.groups if self.partition_for(g) == partition]:
            group = self.state.groups.pop(group_id)
            out.extend(sync_group.fail_waiters(self, group, E.not_coordinator))
            group.transition_to(GroupState.DEAD, self.clock.now_ms())
        return out

    # ---- JoinGroup -------------------------------------------------------------------

    def join(
        self,
        request_id: int,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: tuple[Protocol, ...],
        require_known_member_id: bool,
        supports_skip_assignment: bool = False,
    ) -> GroupOutput:
        """JoinGroup. The response for `request_id` is in the returned GroupOutput only when it is
        immediate (errors, MEMBER_ID_REQUIRED, unchanged member of a stable group); otherwise
        in the GroupOutput of the event that completes the rebalance."""
        out = GroupOutput()

        def reply(result: JoinResult) -> GroupOutput:
            out.responses.append((request_id, result))
            return out

        err = self.coordinator_error(group_id)
        if err is not None:
            return reply(JoinResult(err, member_id=member_id))
        if not group_id:
            return reply(JoinResult(E.invalid_group_id, member_id=member_id))
        if not (
            self.config.group_min_session_timeout_ms
            <= session_timeout_ms
            <= self.config.group_max_session_timeout_ms
        ):
            return reply(JoinResult(E.invalid_session_timeout, member_id=member_id))
        consumer_group = self.state.consumer_groups.get(group_id)
        if consumer_group is not None and not consumer_group.is_empty:
            # a classic consumer joining a consumer group (online migration)
            return classic_join.join(self, request_id, consumer_group, classic_join.ClassicJoin(
                member_id, group_instance_id, client_id, client_host, session_timeout_ms, rebalance_timeout_ms,
                protocol_type, protocols, require_known_member_id))
        coexistence.before_classic_join(self, group_id, out)
        group = self.state.groups.get(group_id)
        if group is None:
            if member_id:
                return reply(JoinResult(E.unknown_member_id, member_id=member_id))
            group = ClassicGroup(group_id, state_timestamp_ms=self.clock.now_ms())
            self.state.groups[group_id] = group
        if group.is_in(GroupState.DEAD):
            return reply(JoinResult(E.coordinator_not_available, member_id=member_id))
        if not group.supports_protocols(protocol_type, protocols):
            return reply(JoinResult(E.inconsistent_group_protocol, member_id=member_id))
        now = self.clock.monotonic_ms()

        if not member_id and group_instance_id is not None and group_instance_id in group.static_members:
            # A known static member restarted: it takes over its instance's place (KIP-345).
            new_id = static_members.new_member_id(client_id, group_instance_id, self._new_uuid())
            return rejoin_static(
                self, group, request_id, group_instance_id, new_id, client_id, client_host,
                session_timeout_ms, rebalance_timeout_ms, protocols, supports_skip_assignment, out,
            )
        known = group.members.get(member_id) if member_id else None
        if member_id and member_id not in group.pending_members:
            err = static_members.validate_member(group, member_id, group_instance_id)
            if err != E.none:
                return reply(JoinResult(err, member_id=member_id))
        if known is None:
            if len(group.members) >= self.config.group_max_size:
                return reply(JoinResult(E.group_max_size_reached, member_id=member_id))
            if not member_id:
                new_id = static_members.new_member_id(client_id, group_instance_id, self._new_uuid())
                if require_known_member_id and group_instance_id is None:
                    # KIP-394: hand out the id first; the member joins for real with it.
                    group.pending_members[new_id] = now + session_timeout_ms
                    return reply(JoinResult(E.member_id_required, member_id=new_id))
                member_id = new_id
            group.pending_members.pop(member_id, None)
            member = MemberMetadata(
                member_id, group_instance_id, client_id, client_host,
                rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
            )
            member.is_new = group.is_in(GroupState.PREPARING_REBALANCE, GroupState.EMPTY) and group.generation_id == 0
            group.add_member(member)
            self.await_join(group, member, request_id, out)
            timeout = self.config.new_member_join_timeout_ms if member.is_new else session_timeout_ms
            group.heartbeat_deadline_ms[member_id] = now + timeout
            self.prepare_rebalance(group, out, new_member=True)
            self.try_complete_join(group, out)
            return out

        # A known member rejoins.
        if group.is_in(GroupState.EMPTY):
            return reply(JoinResult(E.unknown_member_id, member_id=member_id))
        known.session_timeout_ms = session_timeout_ms
        known.rebalance_timeout_ms = rebalance_timeout_ms
        known.client_id, known.client_host = client_id, client_host
        unchanged = known.matches(protocols)
        if group.is_in(GroupState.COMPLETING_REBALANCE) and unchanged:
            # The member missed its JoinGroup response: send the current generation again.
            return reply(self.join_result(group, known))
        if group.is_in(GroupState.STABLE) and unchanged and member_id != group.leader_id:
            return reply(self.join_result(group, known, with_members=False))
        known.protocols = protocols
        self.await_join(group, known, request_id, out)
        group.heartbeat_deadline_ms[member_id] = now + session_timeout_ms
        self.prepare_rebalance(group, out)
        self.try_complete_join(group, out)
        return out

    def await_join(self, group: ClassicGroup, member: MemberMetadata, request_id: int, out: GroupOutput) -> None:
        key = (group.group_id, member.member_id)
        previous = self.state.pending_joins.get(key)
        if previous is not None and previous != request_id:
            # Superseded by a newer JoinGroup from the same member.
            out.responses.append((previous, JoinResult(E.rebalance_in_progress, member_id=member.member_id)))
        self.state.pending_joins[key] = request_id
        member.awaiting_join = True

    def join_result(self, group: ClassicGroup, member: MemberMetadata, with_members: bool | None = None) -> JoinResult:
        is_leader = member.member_id == group.leader_id
        members: tuple[JoinMember, ...] = ()
        if with_members if with_members is not None else is_leader:
            members = tuple(
                JoinMember(m.member_id, m.group_instance_id, m.metadata_for(group.protocol_name))
                for m in group.members.values()
            )
        return JoinResult(
            E.none, group.generation_id, group.protocol_type, group.protocol_name,
            group.leader_id or "", member.member_id, members,
        )

    def prepare_rebalance(self, group: ClassicGroup, out: GroupOutput, new_member: bool = False) -> None:
        """Kafka `maybePrepareRebalance` / `prepareRebalance`."""
        now = self.clock.monotonic_ms()
        if group.is_in(GroupState.PREPARING_REBALANCE):
            if new_member and group.initial_delay_limit_ms is not None:
                group.join_deadline_ms = min(
                    now + self.config.group_initial_rebalance_delay_ms, group.initial_delay_limit_ms
                )
            return
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # The leader's assignment will never come for this generation.
            for member in group.members.values():
                member.assignment = b""
            out.extend(sync_group.fail_syncs(self, group, E.rebalance_in_progress))
        group.sync_deadline_ms = None
        group.pending_sync_members.clear()
        if group.is_in(GroupState.EMPTY) and self.config.group_initial_rebalance_delay_ms > 0:
            group.initial_delay_limit_ms = now + group.max_rebalance_timeout_ms()
            group.join_deadline_ms = min(
                now + self.config.group_initial_rebalance_delay_ms, group.initial_delay_limit_ms
            )
        else:
            group.initial_delay_limit_ms = None
            group.join_deadline_ms = now + group.max_rebalance_timeout_ms()
        group.transition_to(GroupState.PREPARING_REBALANCE, self.clock.now_ms())

    def try_complete_join(self, group: ClassicGroup, out: GroupOutput) -> None:
        # During the initial delay only the timer completes the join (Kafka `InitialDelayedJoin`).
        if (
            group.is_in(GroupState.PREPARING_REBALANCE)
            and group.initial_delay_limit_ms is None
            and group.all_members_joined()
        ):
            self.complete_join(group, out)

    def complete_join(self, group: ClassicGroup, out: GroupOutput) -> None:
        """Kafka `completeClassicGroupJoin`: drop members that did not rejoin, start the next
        generation and answer every waiting JoinGroup (the leader gets the member list)."""
        group.join_deadline_ms = None
        group.initial_delay_limit_ms = None
        group.pending_members.clear()
        for member_id in static_members.not_rejoined_dynamic_members(group):
            group.remove_member(member_id)
        now = self.clock.monotonic_ms()
        if group.members and not static_members.elect_joined_leader(group):
            # No member rejoined (only static ones remain): wait until their sessions end them.
            group.join_deadline_ms = now + group.max_rebalance_timeout_ms()
            return
        group.init_next_generation(self.clock.now_ms())
        if group.is_in(GroupState.EMPTY):
            out.extend(self.store_group(group, on_success=GroupOutput, on_failure=lambda _e: GroupOutput()))
            return
        for member in group.members.values():
            member.awaiting_join = False
            member.is_new = False
            group.heartbeat_deadline_ms[member.member_id] = now + member.session_timeout_ms
            request_id = self.state.pending_joins.pop((group.group_id, member.member_id), None)
            if request_id is not None:
                out.responses.append((request_id, self.join_result(group, member)))
        group.pending_sync_members = set(group.members)
        group.sync_deadline_ms = now + group.max_rebalance_timeout_ms()

    # ---- SyncGroup -------------------------------------------------------------------

    sync = sync_group.sync  # SyncGroup of classic groups, in its own module

    # ---- Heartbeat / LeaveGroup ------------------------------------------------------

    def heartbeat(self, *, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None = None) -> ErrorCode:
        err = self.coordinator_error(group_id)
        if err is not None:
            return err
        consumer_group = self.state.consumer_groups.get(group_id)
        if consumer_group is not None:
            return classic_members.heartbeat(self, consumer_group, member_id=member_id, instance_id=group_instance_id,
                                             generation_id=generation_id)
        group = self.state.groups.get(group_id)
        if group is None:
            return E.unknown_member_id
        if group.is_in(GroupState.DEAD):
            return E.coordinator_not_available
        member_error = static_members.validate_member(group, member_id, group_instance_id)
        if member_error != E.none:
            return member_error
        if group.is_in(GroupState.EMPTY):
            return E.unknown_member_id
        if generation_id != group.generation_id:
            return E.illegal_generation
        member = group.members[member_id]
        group.heartbeat_deadline_ms[member_id] = self.clock.monotonic_ms() + member.session_timeout_ms
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return E.rebalance_in_progress
        return E.none

    def leave(self, request_id: int, *, group_id: str, members: list[tuple[str, str | None]]) -> GroupOutput:
        """LeaveGroup of (member_id, group_instance_id) pairs (v3+ batches; v0-2 one member)."""
        out = GroupOutput()
        err = self.coordinator_error(group_id)
        consumer_group = self.state.consumer_groups.get(group_id)
        if err is None and consumer_group is not None:
            return classic_members.leave(self, request_id, consumer_group, members)
        group = self.state.groups.get(group_id)
        if err is None and group is not None and group.is_in(GroupState.DEAD):
            err = E.coordinator_not_available
        if err is not None:
            out.responses.append((request_id, LeaveResult(err)))
            return out
        results = []
        for member_id, instance_id in members:
            error, target = static_members.leave_target(group, member_id, instance_id)
            if group is not None and error == E.none:
                if target in group.pending_members:
                    del group.pending_members[target]
                    self.try_complete_join(group, out)
                else:
                    self.remove_member_and_update_group(group, target, out)
            results.append(LeaveMemberResult(member_id, instance_id, error))
        out.responses.append((request_id, LeaveResult(E.none, tuple(results))))
        return out

    def remove_member_and_update_group(self, group: ClassicGroup, member_id: str, out: GroupOutput) -> None:
        """Kafka `removeMemberAndUpdateClassicGroup`."""
        request_id = self.state.pending_joins.pop((group.group_id, member_id), None)
        if request_id is not None:
            out.responses.append((request_id, JoinResult(E.unknown_member_id, member_id=member_id)))
        sync_id = self.state.pending_syncs.pop((group.group_id, member_id), None)
        if sync_id is not None:
            out.responses.append((sync_id, SyncResult(E.unknown_member_id)))
        group.remove_member(member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, out)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            if group.is_empty and group.initial_delay_limit_ms is not None:
                group.initial_delay_limit_ms = None
            self.try_complete_join(group, out)

    # ---- deadlines -------------------------------------------------------------------

    def next_deadline_ms(self) -> int | None:
        deadlines = [d for group in self.state.groups.values() for d in expiry.deadlines(group)]
        consumer = membership.next_deadline_ms(self)
        if consumer is not None:
            deadlines.append(consumer)
        share = share_heartbeat.next_deadline_ms(self.state.share_groups.values())
        if share is not None:
            deadlines.append(share)
        deadlines.extend(self.state.offsets_expiration_deadline_ms.values())
        return min(deadlines, default=None)

    def poll(self, now_ms: int) -> GroupOutput:
        """Act on every deadline at or before `now_ms` (monotonic), offset expiration last."""
        out = GroupOutput()
        for group in list(self.state.groups.values()):
            expiry.expire(self, group, now_ms, out)
        out.extend(membership.expire(self, now_ms))
        out.extend(share_heartbeat.expire(self, now_ms))
        out.extend(expiration.poll(self, now_ms))
        return out

    def on_topics_deleted(self, topics: Collection[str]) -> GroupOutput:
        """Kafka `onPartitionsDeleted`: the committed offsets of topics the metadata image
        dropped leave every group of the partitions loaded here (`offsets.deleted_topics`)."""
        loaded = {p for p, status in self.state.partitions.items() if status is PartitionStatus.LOADED}
        return deleted_topics.delete_offsets_of(self, topics, loaded)

    # ---- persistence -----------------------------------------------------------------

    def store_group(
        self, group: ClassicGroup, *, on_success: Callable[[], GroupOutput], on_failure: Callable[[ErrorCode], GroupOutput]
    ) -> GroupOutput:
        return self.append(group.group_id, [replay.group_metadata_record(group)], on_success, on_failure)

    def append(
        self,
        group_id: str,
        records: list[tuple[bytes, bytes | None]],
        on_success: Callable[[], GroupOutput],
        on_failure: Callable[[ErrorCode], GroupOutput],
    ) -> GroupOutput:
        """Ask the shell to append `records` to the group's partition; the callbacks run from
        `on_append_completed`."""
        return self.append_to_partition(self.partition_for(group_id), records, on_success, on_failure)

    def append_to_partition(
        self,
        partition: int,
        records: list[tuple[bytes, bytes | None]],
        on_success: Callable[[], GroupOutput],
        on_failure: Callable[[ErrorCode], GroupOutput],
    ) -> GroupOutput:
        self._next_ticket += 1
        ticket = self._next_ticket
        self._waiting[ticket] = _Waiting(on_success, on_failure)
        return GroupOutput(appends=[Append(ticket, partition, records)])

    def on_append_completed(self, ticket: int, error: ErrorCode = E.none) -> GroupOutput:
        waiting = self._waiting.pop(ticket)
        return waiting.on_success() if error == E.none else waiting.on_failure(error)
