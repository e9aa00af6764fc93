"""The controller's side of the cluster (Kafka's `ClusterControlManager` and
`ReplicationControlManager` as the `QuorumController` runs them), a part of `MetadataService`:
broker registrations, heartbeats and the fencing of expired sessions, ISR changes
(AlterPartition), leader elections, partition reassignments and the preferred leader
rebalance. Each runs its sans-IO operation from `kmirror.metadata.controller` under the
service's lock and commits the records before it answers.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager

from kio.schema.errors import ErrorCode

from kmirror.config.server import ServerConfig
from kmirror.metadata.controller.alter_partition import (
    AlterPartitionItem,
    AlterPartitionResult,
    alter_partition,
)
from kmirror.metadata.controller.brokers import (
    BrokerHeartbeatManager,
    HeartbeatReply,
    broker_heartbeat,
    fence_broker,
    register_broker,
    unregister_broker,
)
from kmirror.metadata.controller.elections import ElectionResult, elect_leaders
from kmirror.metadata.controller.log_dirs import DirAssignment, assign_replicas_to_dirs
from kmirror.metadata.controller.partition_change import eligible_brokers, imbalanced_partitions
from kmirror.metadata.controller.reassignment import (
    OngoingReassignment,
    ReassignmentResult,
    ReassignmentTarget,
    alter_partition_reassignments,
    list_partition_reassignments,
)
from kmirror.metadata.controller.result import ApiError, ControllerResult, NotControllerError
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.records import BrokerEndpoint, BrokerRegistrationChangeRecord, Record
from kmirror.ports import Clock

log = logging.getLogger("kmirror.metadata.controller_service")  # one logger for all of the controller's lines


class ClusterControl:
    # Provided by `MetadataService`.
    _config: ServerConfig
    _clock: Clock
    _image: MetadataImage
    _lock: AbstractAsyncContextManager[None]
    heartbeats: BrokerHeartbeatManager

    async def _commit(self, records: Sequence[Record]) -> None:
        raise NotImplementedError

    @property
    def active(self) -> bool:
        raise NotImplementedError

    def _now_ms(self) -> int:
        return self._clock.monotonic_ms()

    def _unclean_default(self) -> bool:
        return bool(self._config.unclean_leader_election_enable)

    def _warn_unclean(self) -> None:
        for topic, partition, leader in self.heartbeats.unclean_warnings:
            log.warning(
                "Unclean leader election: broker %d leads %s-%d without being in its ISR; "
                "records acknowledged by the previous ISR may be lost",
                leader,
                topic,
                partition,
            )
        self.heartbeats.unclean_warnings.clear()

    async def register_broker(
        self, broker_id: int, incarnation_id: uuid.UUID, endpoints: Sequence[BrokerEndpoint], rack: str | None,
        cluster_id: str | None = None, log_dirs: Sequence[uuid.UUID] = (),
    ) -> int | ApiError:
        """BrokerRegistration: the new broker epoch (the broker starts fenced)."""
        if cluster_id is not None and self._image.cluster_id is not None and cluster_id != self._image.cluster_id:
            return ApiError(ErrorCode.inconsistent_cluster_id)
        async with self._lock:
            result = register_broker(self._image, broker_id, incarnation_id, endpoints, rack, self.heartbeats, log_dirs,
                                     self._unclean_default())
            await self._commit(result.records)
            self._warn_unclean()
            self.heartbeats.touch(broker_id, self._now_ms())
            assert result.response is not None
            return result.response

    def _heartbeat_result(
        self, broker_id: int, broker_epoch: int, offset: int, want_fence: bool, want_shut_down: bool,
        cordoned_log_dirs: Sequence[uuid.UUID] | None = None, offline_log_dirs: Sequence[uuid.UUID] = (),
    ) -> ControllerResult[HeartbeatReply]:
        return broker_heartbeat(
            self._image, broker_id, broker_epoch, offset, want_fence, want_shut_down, self.heartbeats,
            self._now_ms(), self._unclean_default(), cordoned_log_dirs, offline_log_dirs,
        )

    async def broker_heartbeat(
        self, broker_id: int, broker_epoch: int, current_metadata_offset: int, want_fence: bool = False,
        want_shut_down: bool = False, cordoned_log_dirs: Sequence[uuid.UUID] | None = None,
        offline_log_dirs: Sequence[uuid.UUID] = (),
    ) -> HeartbeatReply:
        async with self._lock:
            before = self._image.brokers.get(broker_id)
            result = self._heartbeat_result(broker_id, broker_epoch, current_metadata_offset, want_fence, want_shut_down,
                                            cordoned_log_dirs, offline_log_dirs)
            await self._commit(result.records)
            for record in result.records:
                if isinstance(record, BrokerRegistrationChangeRecord) and record.log_dirs is not None and before:
                    log.warning("Directories %s in broker %d marked offline, remaining directories: %s",
                                [str(d) for d in before.log_dirs if d not in record.log_dirs], broker_id,
                                [str(d) for d in record.log_dirs])
            self._warn_unclean()
            assert result.response is not None
            return result.response

    async def assign_replicas_to_dirs(
        self, broker_id: int, broker_epoch: int, assignments: Sequence[DirAssignment],
    ) -> tuple[ApiError, dict[DirAssignment, ApiError]]:
        """AssignReplicasToDirs (KIP-858): the request's error and each replica's."""
        async with self._lock:
            result = assign_replicas_to_dirs(self._image, broker_id, broker_epoch, assignments,
                                             eligible_brokers(self._image, self.heartbeats.shutting_down),
                                             self._unclean_default())
            await self._commit(result.records)
            assert result.response is not None
            error, errors, unclean = result.response
            self.heartbeats.unclean_warnings.extend(unclean)
            self._warn_unclean()
            return error, errors

    async def check_broker_sessions(self) -> list[int]:
        """Fence every broker whose session expired; returns their ids. Nothing on a controller
        that is not active, or stops being active meanwhile: the active one keeps the sessions."""
        fenced: list[int] = []
        try:
            async with self._lock:
                for broker_id in self.heartbeats.expired(self._image, self._now_ms()):
                    if broker_id == self._config.node_id and self._config.is_broker:
                        continue  # the co-located broker shares this process: it is alive while we are
                    log.info("fencing broker %d: no heartbeat for %d ms", broker_id, self.heartbeats.session_timeout_ms)
                    await self._commit(fence_broker(self._image, broker_id, self.heartbeats,
                                                    self._unclean_default()).records)
                    fenced.append(broker_id)
                self._warn_unclean()
        except NotControllerError as exc:
            log.debug("broker session check: %s", exc)
        return fenced

    def controlled_shutdowns_pending(self) -> list[int]:
        """The other brokers whose controlled shutdown is under way, not granted yet."""
        pending = self.heartbeats.controlled_shutdowns_pending(self._image, asked=self.active)
        return [b for b in pending if b != self._config.node_id]

    async def unregister_broker(self, broker_id: int) -> ApiError:
        async with self._lock:
            result = unregister_broker(self._image, broker_id, self.heartbeats, self._unclean_default())
            await self._commit(result.records)
            self._warn_unclean()
            assert result.response is not None
            if result.response.code == ErrorCode.none:
                log.info("unregistered broker %d", broker_id)
            return result.response

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, items: Sequence[AlterPartitionItem]
    ) -> tuple[ApiError, list[AlterPartitionResult]]:
        async with self._lock:
            result = alter_partition(self._image, broker_id, broker_epoch, items, self.heartbeats.shutting_down)
            await self._commit(result.records)
            assert result.response is not None
            for r in result.response[1]:
                if r.error.code == ErrorCode.invalid_update_version:
                    log.info("Rejecting AlterPartition from broker %d for %s", broker_id, r.error.message)
            return result.response

    async def elect_leaders(
        self, election_type: int, partitions: Mapping[str, Sequence[int]] | None
    ) -> list[ElectionResult]:
        async with self._lock:
            eligible = eligible_brokers(self._image, self.heartbeats.shutting_down)
            result = elect_leaders(self._image, election_type, partitions, eligible)
            await self._commit(result.records)
            assert result.response is not None
            for r in result.response:
                if r.unclean_leader is not None:
                    log.warning(
                        "Unclean leader election: broker %d leads %s-%d; records acknowledged by the previous ISR "
                        "may be lost", r.unclean_leader, r.topic, r.partition,
                    )
            return result.response

    async def alter_partition_reassignments(
        self, topics: Mapping[str, Sequence[ReassignmentTarget]], allow_replication_factor_change: bool = True
    ) -> list[ReassignmentResult]:
        async with self._lock:
            eligible = eligible_brokers(self._image, self.heartbeats.shutting_down)
            result = alter_partition_reassignments(
                self._image, topics, eligible, self._unclean_default(), allow_replication_factor_change)
            await self._commit(result.records)
            assert result.response is not None
            for r in result.response:
                if r.error.code != ErrorCode.none:
                    log.info("Unable to alter partition reassignment for %s:%d: %s", r.topic, r.partition,
                             r.error.message or r.error.code.name)
            return result.response

    def list_partition_reassignments(self, topics: Mapping[str, Sequence[int]] | None) -> list[OngoingReassignment]:
        return list_partition_reassignments(self._image, topics)

    async def rebalance_leaders(self) -> int:
        """`auto.leader.rebalance.enable`: preferred elections for imbalanced partitions (by the
        active controller only)."""
        try:
            async with self._lock:
                records = imbalanced_partitions(self._image, eligible_brokers(self._image, self.heartbeats.shutting_down))
                await self._commit(list(records))
                return len(records)
        except NotControllerError as exc:
            log.debug("leader rebalance: %s", exc)
            return 0
