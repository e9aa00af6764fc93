"""The group coordinator (`__consumer_offsets`, Kafka's `GroupCoordinatorService`): the sans-IO
`GroupCoordinator` core on `CoordinatorRuntime`. Handlers call its coroutines; results are
the core's values."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Collection

from kmirror.coordinator.config import CoordinatorConfig
from kmirror.coordinator.consumer_group import admin as consumer_admin
from kmirror.coordinator.consumer_group import heartbeat as consumer_heartbeat
from kmirror.coordinator.consumer_group.messages import HeartbeatRequest, HeartbeatResult
from kmirror.coordinator.consumer_group.ports import BROKER_DEFAULTS, GroupConfig, TopicsView
from kmirror.coordinator.group import admin
from kmirror.coordinator.group.coordinator import GroupCoordinator
from kmirror.coordinator.group.group import group_subscribed_topics
from kmirror.coordinator.group.member import Protocol as MemberProtocol
from kmirror.coordinator.offsets import commits, txn_commits
from kmirror.coordinator.offsets.commits import OffsetToCommit
from kmirror.coordinator.ports import CoordinatorLog
from kmirror.coordinator.results import (
    Append,
    CommitResult,
    DeleteGroupsResult,
    DescribedGroup,
    FetchOffsetsResult,
    JoinResult,
    LeaveResult,
    ListGroupsResult,
    OffsetDeleteResult,
    Output,
    SyncResult,
)
from kmirror.coordinator.runtime import KeyValueCoordinatorRuntime
from kmirror.coordinator.share_group import admin as share_admin
from kmirror.coordinator.share_group import heartbeat as share_heartbeat
from kmirror.coordinator.share_group import offsets as share_offsets
from kmirror.coordinator.share_group import state_store as share_state_store
from kmirror.coordinator.share_group.state_records import ShareSnapshot, ShareStateKey
from kmirror.ports import Clock
from kmirror.protocol.errors import ErrorCode


class GroupCoordinatorService(KeyValueCoordinatorRuntime):
    """The group coordinator on `CoordinatorRuntime` (`__consumer_offsets`)."""

    core: GroupCoordinator

    def __init__(self, node_id: int, config: object, log: CoordinatorLog, clock: Clock,
                 topics: Callable[[], TopicsView] = dict) -> None:
        """`topics`: the cluster's topics now (the broker's metadata image), which the classic
        members of consumer groups need (their assignments name topics, the group topic ids)."""
        self.node_id = node_id
        self.config = config
        self.core_config = config if isinstance(config, CoordinatorConfig) else CoordinatorConfig.from_server_config(config)
        super().__init__(GroupCoordinator(self.core_config, clock, lambda: str(uuid.uuid4()), topics), log, clock,
                         "__consumer_offsets")

    def on_topics_deleted(self, topics: Collection[str]) -> None:
        """Tombstone the committed offsets of topics the metadata image dropped."""
        if topics:
            self._spawn(self._execute(self.core.on_topics_deleted(topics)))

    def partition_for(self, group_id: str) -> int:
        return self.core.partition_for(group_id)

    def _replay(self, partition: int) -> tuple[int, Output[Append] | None]:
        """Also restore the offsets of transactions still open in the partition (pending)."""
        count, out = self._replay_key_value(partition, self.core.complete_load)
        txn_commits.restore_pending(self.core, partition, self._log.open_transactions(partition))
        return count, out

    def coordinator_error(self, group_id: str) -> ErrorCode | None:
        """None when this node coordinates `group_id` now (leads and has loaded its partition)."""
        return self.core.coordinator_error(group_id)

    # ---- requests --------------------------------------------------------------------

    async def join_group(
        self, *, group_id: str, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
        session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]], require_known_member_id: bool, supports_skip_assignment: bool = False,
    ) -> JoinResult:
        rid, future = self._new_waiter()
        out = self.core.join(
            rid, group_id=group_id, member_id=member_id, group_instance_id=group_instance_id,
            client_id=client_id, client_host=client_host, session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms, protocol_type=protocol_type,
            protocols=tuple(MemberProtocol(n, m) for n, m in protocols), require_known_member_id=require_known_member_id,
            supports_skip_assignment=supports_skip_assignment,
        )
        return await self._answer_as(JoinResult, rid, future, out)

    async def sync_group(
        self, *, group_id: str, generation_id: int, member_id: str, protocol_type: str | None,
        protocol_name: str | None, assignments: dict[str, bytes], group_instance_id: str | None = None,
    ) -> SyncResult:
        rid, future = self._new_waiter()
        out = self.core.sync(
            rid, group_id=group_id, generation_id=generation_id, member_id=member_id,
            protocol_type=protocol_type, protocol_name=protocol_name, assignments=assignments,
            group_instance_id=group_instance_id,
        )
        return await self._answer_as(SyncResult, rid, future, out)

    def heartbeat(self, *, group_id: str, generation_id: int, member_id: str,
                  group_instance_id: str | None = None) -> ErrorCode:
        error = self.core.heartbeat(group_id=group_id, generation_id=generation_id, member_id=member_id,
                                    group_instance_id=group_instance_id)
        self._rearm()
        return error

    async def leave_group(self, *, group_id: str, members: list[tuple[str, str | None]]) -> LeaveResult:
        rid, future = self._new_waiter()
        return await self._answer_as(LeaveResult, rid, future, self.core.leave(rid, group_id=group_id, members=members))

    async def commit_offsets(
        self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
        offsets: list[OffsetToCommit], retention_time_ms: int = commits.DEFAULT_RETENTION_TIME_MS,
    ) -> CommitResult:
        rid, future = self._new_waiter()
        out = commits.commit_offsets(
            self.core, rid, group_id=group_id, generation_id=generation_id, member_id=member_id,
            group_instance_id=group_instance_id, offsets=offsets, retention_time_ms=retention_time_ms,
        )
        return await self._answer_as(CommitResult, rid, future, out)

    def fetch_offsets(self, *, group_id: str, topics: list[tuple[str, list[int]]] | None,
                      require_stable: bool = False, member_id: str | None = None,
                      member_epoch: int = -1) -> FetchOffsetsResult:
        result = commits.fetch_offsets(self.core, group_id=group_id, topics=topics, member_id=member_id,
                                       member_epoch=member_epoch)
        return txn_commits.with_pending_marked_unstable(self.core, result) if require_stable else result

    async def txn_commit_offsets(
        self, *, transactional_id: str, group_id: str, producer_id: int, producer_epoch: int, generation_id: int,
        member_id: str, group_instance_id: str | None, offsets: list[OffsetToCommit],
    ) -> CommitResult:
        """Kafka `CoordinatorRuntime.scheduleTransactionalWriteOperation`: the group's partition
        is verified with the transaction coordinator first (KIP-890 part 1), then the core
        runs the commit, whose append carries the verification guard."""
        verification = None
        if self.core.coordinator_error(group_id) is None:
            verification = await self._log.maybe_start_transaction_verification(
                self.core.partition_for(group_id), transactional_id=transactional_id, producer_id=producer_id,
                producer_epoch=producer_epoch)
        rid, future = self._new_waiter()
        out = txn_commits.txn_commit_offsets(
            self.core, rid, group_id=group_id, producer_id=producer_id, producer_epoch=producer_epoch,
            generation_id=generation_id, member_id=member_id, group_instance_id=group_instance_id, offsets=offsets,
            verification=verification,
        )
        return await self._answer_as(CommitResult, rid, future, out)

    async def complete_transaction(self, partition: int, *, producer_id: int, producer_epoch: int,
                                   coordinator_epoch: int, committed: bool) -> ErrorCode:
        """Kafka `GroupCoordinatorService.completeTransaction`: WriteTxnMarkers for
        `__consumer_offsets-<partition>`, whose marker settles the producer's pending
        transactional offsets there (`txn_commits.replay_end_transaction_marker`)."""
        return await self.schedule_transaction_completion(
            partition, producer_id=producer_id, producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch,
            committed=committed, replay=lambda: txn_commits.replay_end_transaction_marker(
                self.core, partition, producer_id=producer_id, committed=committed))

    async def delete_offsets(self, *, group_id: str, partitions: list[tuple[str, int]]) -> OffsetDeleteResult:
        group = self.core.groups.get(group_id)
        subscribed = group_subscribed_topics(group) if group is not None else None
        rid, future = self._new_waiter()
        out = commits.delete_offsets(
            self.core, rid, group_id=group_id, partitions=partitions, subscribed_topics=subscribed
        )
        return await self._answer_as(OffsetDeleteResult, rid, future, out)

    def list_groups(self, states_filter: list[str], types_filter: list[str]) -> ListGroupsResult:
        return admin.list_groups(self.core, states_filter, types_filter)

    def describe_groups(self, group_ids: list[str], *, missing_is_error: bool) -> list[DescribedGroup]:
        return [admin.describe_group(self.core, g, missing_is_error=missing_is_error) for g in group_ids]

    async def delete_groups(self, group_ids: list[str]) -> DeleteGroupsResult:
        rid, future = self._new_waiter()
        return await self._answer_as(DeleteGroupsResult, rid, future, admin.delete_groups(self.core, rid, group_ids))

    # ---- KIP-848 consumer groups ------------------------------------------------------

    async def consumer_group_heartbeat(self, request: HeartbeatRequest, topics: TopicsView,
                                       group_config: GroupConfig = BROKER_DEFAULTS) -> HeartbeatResult:
        rid, future = self._new_waiter()
        out = consumer_heartbeat.heartbeat(self.core, rid, request, topics, group_config)
        return await self._answer_as(HeartbeatResult, rid, future, out)

    def consumer_group_describe(self, group_ids: list[str]) -> list[consumer_admin.DescribedConsumerGroup]:
        return [consumer_admin.describe(self.core, g) for g in group_ids]

    # ---- KIP-932 share groups ---------------------------------------------------------

    async def share_group_heartbeat(self, request: share_heartbeat.ShareHeartbeatRequest, topics: TopicsView,
                                    group_config: GroupConfig) -> HeartbeatResult:
        rid, future = self._new_waiter()
        out = share_heartbeat.heartbeat(self.core, rid, request, topics, group_config)
        return await self._answer_as(HeartbeatResult, rid, future, out)

    def share_group_describe(self, group_ids: list[str]) -> list[share_admin.DescribedShareGroup]:
        return [share_admin.describe(self.core, g) for g in group_ids]

    def read_share_state(self, key: ShareStateKey) -> ShareSnapshot | None | ErrorCode:
        return share_state_store.read(self.core, key)

    async def write_share_state(self, key: ShareStateKey, snapshot: ShareSnapshot) -> ErrorCode:
        rid, future = self._new_waiter()
        out = share_state_store.write(self.core, rid, key, snapshot)
        return (await self._answer_as(share_state_store.ShareStateWritten, rid, future, out)).error

    def describe_share_group_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None
                                     ) -> share_offsets.ShareOffsetsResult:
        return share_offsets.describe(self.core, group_id, topics)

    async def alter_share_group_offsets(self, group_id: str, offsets: list[tuple[str, int, int]]
                                        ) -> share_offsets.ShareOffsetsResult:
        rid, future = self._new_waiter()
        out = share_offsets.alter(self.core, rid, group_id, offsets)
        return await self._answer_as(share_offsets.ShareOffsetsResult, rid, future, out)

    async def delete_share_group_offsets(self, group_id: str, topics: list[str]) -> share_offsets.ShareOffsetsResult:
        rid, future = self._new_waiter()
        out = share_offsets.delete(self.core, rid, group_id, topics)
        return await self._answer_as(share_offsets.ShareOffsetsResult, rid, future, out)
