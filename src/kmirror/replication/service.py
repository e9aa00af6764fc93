"""The node's replication machinery in one place: replica fetchers, AlterPartition sending
and the periodic ISR check (Kafka `ReplicaManager.startup`: `isr-expiration` every
`replica.lag.time.max.ms / 2`).

Built by the node with its replica manager and controller channel; `start` after the first
metadata image, `on_metadata_change` after each image, `stop` before the logs close.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kmirror.config.server import ServerConfig
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.mirrors import mirroring_enabled
from kmirror.ports import Clock
from kmirror.protocol.mirror import fetch as fetch_v19
from kmirror.replication.alter_partition_sender import (
    AlterPartitionSender,
    ControllerSender,
    LocalAlterPartitionSender,
    LocalController,
)
from kmirror.replication.fetcher.endpoint import LeaderEndPoint
from kmirror.replication.fetcher.local_replica import ReplicaManagerLocalReplica
from kmirror.replication.fetcher.manager import ReplicaFetcherManager
from kmirror.replication.fetcher.policy import replica_fetch_policy
from kmirror.replication.fetcher.remote_endpoint import RemoteLeaderEndPoint
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.replication.replication_throttles import FollowerThrottle, ReplicationThrottles
from kmirror.types import TopicPartition

log = logging.getLogger(__name__)


class ReplicationService:
    def __init__(
        self,
        config: ServerConfig,
        replica_manager: ReplicaManager,
        controller_channel: ControllerSender | None,
        clock: Clock,
        broker_epoch: Callable[[], int] = lambda: -1,
        endpoint_for: Callable[[int], LeaderEndPoint | None] | None = None,
        local_controller: LocalController | None = None,
    ) -> None:
        """`controller_channel` reaches the active controller; a combined node passes None and
        its `MetadataService` as `local_controller` instead (one of the two is given)."""
        self.config = config
        self.replica_manager = replica_manager
        self.clock = clock
        self.broker_id = replica_manager.node_id
        self.alter_partition: AlterPartitionSender | LocalAlterPartitionSender
        if controller_channel is not None:
            self.alter_partition = AlterPartitionSender(controller_channel, replica_manager, self.broker_id, broker_epoch)
        elif local_controller is not None:
            self.alter_partition = LocalAlterPartitionSender(local_controller, replica_manager, self.broker_id, broker_epoch)
        else:
            raise ValueError("ISR changes need a controller channel or the local controller")
        self.throttles = ReplicationThrottles(self.broker_id, config, clock)
        replica_manager.leader_quota = self.throttles.leader
        self.fetcher_manager = ReplicaFetcherManager(
            ReplicaManagerLocalReplica(replica_manager),
            replica_fetch_policy(config, self.broker_id),
            endpoint_for or self._remote_endpoint,
            clock,
            quota=FollowerThrottle(self.throttles.follower, self._in_sync),
        )
        self._isr_task: asyncio.Task[None] | None = None

    def _in_sync(self, tp: TopicPartition) -> bool:
        partition = self.replica_manager.get_partition(tp)
        return partition is not None and self.broker_id in partition.isr

    def _remote_endpoint(self, leader_id: int) -> LeaderEndPoint | None:
        """The leader's inter-broker listener from its registration in the image."""
        image = self.replica_manager.image
        registration = None if image is None else image.brokers.get(leader_id)
        if registration is None:
            return None
        endpoint = registration.endpoint(self.config.inter_broker_listener_name)
        if endpoint is None:
            return None
        host = endpoint.host if endpoint.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        return RemoteLeaderEndPoint(host, int(endpoint.port), self.broker_id, client_id=f"replica-fetcher-{self.broker_id}",
                                    wanted_fetch_version=(self._wanted_fetch_version, self.clock))

    def _wanted_fetch_version(self) -> int:
        """Fetch v19 (`mirror_leader_epoch`) once the cluster finalized `mirror.version` >= 1."""
        image = self.replica_manager.image
        return fetch_v19.VERSION if image is not None and mirroring_enabled(image) else 0

    def start(self) -> None:
        rm = self.replica_manager
        rm.alter_partition = self.alter_partition
        rm.add_role_listener(self.fetcher_manager.on_role_change)
        self.fetcher_manager.on_role_change(rm.followed_partitions(), [])
        self.fetcher_manager.start()
        self._isr_task = asyncio.get_running_loop().create_task(self._isr_expiration(), name="isr-expiration")

    def on_metadata_change(self, old_image: MetadataImage | None, new_image: MetadataImage | None) -> None:
        del old_image
        if new_image is not None:
            self.throttles.on_image(new_image)
        self.fetcher_manager.retry_pending()

    async def _isr_expiration(self) -> None:
        lag_ms = self.config.replica_lag_time_max_ms
        while True:
            await asyncio.sleep(max(lag_ms // 2, 10) / 1000)
            try:
                self.replica_manager.maybe_shrink_isr()
                await self.fetcher_manager.shutdown_idle_fetchers()
            except Exception:
                log.exception("ISR expiration check failed")

    async def stop(self) -> None:
        task, self._isr_task = self._isr_task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        await self.fetcher_manager.stop()
        await self.alter_partition.close()
