"""Sends the leader's ISR changes to the controller (Kafka `AlterPartitionManager`).

The asyncio side of `AlterPartitionPort`: each submitted `AlterPartitionItem` becomes an
AlterPartition request (key 56, v2 `new_isr` or v3 `new_isr_with_epochs`) through the
broker's controller channel, and the answer goes back to the replica manager. A request that
cannot be sent, or is refused as a whole, is answered to the partition as an error so the
change reverts and the next ISR check proposes again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from kmirror.metadata.controller.alter_partition import AlterPartitionItem as ControllerItem
from kmirror.metadata.controller.alter_partition import AlterPartitionResult
from kmirror.metadata.controller.result import ApiError
from kmirror.protocol.entities import build, has_field, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.outcomes import AlterPartitionItem
from kmirror.replication.partition import PartitionState

log = logging.getLogger(__name__)
ALTER_PARTITION = 56


class ControllerSender(Protocol):
    """The part of `kmirror.runtime.controller_channel.ControllerChannel` used here."""

    async def connection(self) -> Any: ...

    async def send(self, api_key: int, timeout_ms: int | None = None, **fields: Any) -> Any: ...


class LocalController(Protocol):
    """The part of the controller's `MetadataService` used here (a combined node)."""

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, items: Sequence[ControllerItem]
    ) -> tuple[ApiError, list[AlterPartitionResult]]: ...


class AlterPartitionAnswers(Protocol):
    """Where the controller's answers go (`ReplicaManager.handle_alter_partition_response`)."""

    def handle_alter_partition_response(
        self, item: AlterPartitionItem, error: int, committed: PartitionState | None = None
    ) -> None: ...


class _AlterPartitionTasks:
    """One task per submitted item, each answering the replica manager; `close` cancels the
    ones still running."""

    def __init__(self, replica_manager: AlterPartitionAnswers, broker_id: int, broker_epoch: Callable[[], int]) -> None:
        self.replica_manager = replica_manager
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self._tasks: set[asyncio.Task[None]] = set()

    def submit(self, item: AlterPartitionItem) -> None:
        task = asyncio.get_running_loop().create_task(self._send(item))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, item: AlterPartitionItem) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass


class AlterPartitionSender(_AlterPartitionTasks):
    """Through the controller channel (a broker-only node, or any node talking to a remote
    controller); `LocalAlterPartitionSender` serves a combined broker+controller node."""

    def __init__(
        self,
        channel: ControllerSender,
        replica_manager: AlterPartitionAnswers,
        broker_id: int,
        broker_epoch: Callable[[], int] = lambda: -1,
    ) -> None:
        super().__init__(replica_manager, broker_id, broker_epoch)
        self.channel = channel

    async def _send(self, item: AlterPartitionItem) -> None:
        try:
            response = await self._request(item)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("AlterPartition for %s-%d failed: %s", item.topic, item.partition, exc)
            self.replica_manager.handle_alter_partition_response(item, ErrorCode.unknown_server_error)
            return
        error = ErrorCode(response.error_code)
        if error != ErrorCode.none:
            log.warning("AlterPartition for %s-%d refused: %s", item.topic, item.partition, error.name)
            self.replica_manager.handle_alter_partition_response(item, error)
            return
        for topic in response.topics:
            for p in topic.partitions:
                if int(p.partition_index) != item.partition:
                    continue
                code = ErrorCode(p.error_code)
                committed = None
                if code == ErrorCode.none:
                    committed = PartitionState(
                        int(p.leader_id), int(p.leader_epoch), int(p.partition_epoch), (), tuple(int(b) for b in p.isr)
                    )
                else:
                    log.info("AlterPartition for %s-%d (leader epoch %d, partition epoch %d, ISR %s): %s", item.topic,
                             item.partition, item.leader_epoch, item.partition_epoch, list(item.new_isr), code.name)
                self.replica_manager.handle_alter_partition_response(item, code, committed)
                return
        self.replica_manager.handle_alter_partition_response(item, ErrorCode.unknown_server_error)

    async def _request(self, item: AlterPartitionItem) -> Any:
        conn = await self.channel.connection()
        rt = conn.request_type(ALTER_PARTITION)
        part_cls = nested(rt, "PartitionData")
        fields: dict[str, Any] = {}
        if has_field(part_cls, "new_isr_with_epochs"):
            state_cls = nested(rt, "BrokerState")
            fields["new_isr_with_epochs"] = tuple(
                state_cls(broker_id=b, broker_epoch=e) for b, e in zip(item.new_isr, item.broker_epochs, strict=True)
            )
        else:
            fields["new_isr"] = item.new_isr
        part = build(
            part_cls,
            partition_index=item.partition,
            leader_epoch=item.leader_epoch,
            leader_recovery_state=0,
            partition_epoch=item.partition_epoch,
            **fields,
        )
        topic = build(nested(rt, "TopicData"), topic_id=item.topic_id, topic_name=item.topic, partitions=(part,))
        return await self.channel.send(
            ALTER_PARTITION, broker_id=self.broker_id, broker_epoch=self.broker_epoch(), topics=(topic,)
        )


class LocalAlterPartitionSender(_AlterPartitionTasks):
    """A combined node: the controller is in this process (`MetadataService.alter_partition`)."""

    def __init__(self, metadata: LocalController, replica_manager: AlterPartitionAnswers, broker_id: int,
                 broker_epoch: Callable[[], int] = lambda: -1) -> None:
        super().__init__(replica_manager, broker_id, broker_epoch)
        self.metadata = metadata

    async def _send(self, item: AlterPartitionItem) -> None:
        request = ControllerItem(item.topic_id, item.partition, item.leader_epoch, item.new_isr, item.partition_epoch)
        try:
            top, results = await self.metadata.alter_partition(self.broker_id, self.broker_epoch(), [request])
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.warning("AlterPartition for %s-%d failed: %s", item.topic, item.partition, exc)
            self.replica_manager.handle_alter_partition_response(item, ErrorCode.unknown_server_error)
            return
        if ErrorCode(top.code) != ErrorCode.none or not results:
            self.replica_manager.handle_alter_partition_response(item, ErrorCode(top.code) or ErrorCode.unknown_server_error)
            return
        r = results[0]
        code = ErrorCode(r.error.code)
        committed = PartitionState(r.leader_id, r.leader_epoch, r.partition_epoch, (), tuple(r.isr)) if code == ErrorCode.none else None
        self.replica_manager.handle_alter_partition_response(item, code, committed)
