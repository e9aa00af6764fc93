"""The share partition leaders' persister (Kafka's `DefaultStatePersister`): reads and writes
share partition states at the coordinator of their group, the leader of the group's
`__consumer_offsets` partition. On that node it calls the group coordinator; elsewhere it
sends ReadShareGroupState / WriteShareGroupState over the inter-broker listener.
Unreachable or unknown coordinators answer COORDINATOR_NOT_AVAILABLE; the leader tries again
at its next use of the partition."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import overload

from kio.schema.read_share_group_state.v0 import request as read_request
from kio.schema.read_share_group_state.v0 import response as read_response
from kio.schema.write_share_group_state.v0 import request as write_request
from kio.schema.write_share_group_state.v0 import response as write_response
from kio.static.primitive import i8, i16, i32, i64

from kmirror.coordinator.group.service import GroupCoordinatorService
from kmirror.coordinator.share_group.state_records import ShareSnapshot, ShareStateKey
from kmirror.protocol.errors import ErrorCode
from kmirror.runtime.broker_sender import ListenerBrokerSender
from kmirror.types import TopicPartition

log = logging.getLogger("kmirror.share.persister")
CONSUMER_OFFSETS = "__consumer_offsets"


class CoordinatorSharePersister:
    def __init__(self, node_id: int, groups: GroupCoordinatorService,
                 leader_of: Callable[[TopicPartition], int | None], send: ListenerBrokerSender) -> None:
        self.node_id = node_id
        self._groups = groups
        self._leader_of = leader_of
        self._send = send

    def _coordinator(self, group_id: str) -> int | None:
        leader = self._leader_of(TopicPartition(CONSUMER_OFFSETS, self._groups.partition_for(group_id)))
        return leader if leader is not None and leader >= 0 else None

    async def read(self, key: ShareStateKey, leader_epoch: int) -> ShareSnapshot | None | ErrorCode:
        node = self._coordinator(key.group_id)
        if node is None:
            return ErrorCode.coordinator_not_available
        if node == self.node_id:
            return self._groups.read_share_state(key)
        request = read_request.ReadShareGroupStateRequest(group_id=key.group_id, topics=(
            read_request.ReadStateData(topic_id=key.topic_id, partitions=(
                read_request.PartitionData(partition=i32(key.partition), leader_epoch=i32(leader_epoch)),)),))
        response = await self._call(node, request)
        if response is None:
            return ErrorCode.coordinator_not_available
        (result,) = response.results[0].partitions
        if result.error_code != ErrorCode.none:
            return ErrorCode(result.error_code)
        if result.start_offset < 0:
            return None
        return ShareSnapshot(int(result.state_epoch), leader_epoch, int(result.start_offset), tuple(
            (int(b.first_offset), int(b.last_offset), int(b.delivery_state), int(b.delivery_count))
            for b in result.state_batches))

    async def write(self, key: ShareStateKey, snapshot: ShareSnapshot) -> ErrorCode:
        node = self._coordinator(key.group_id)
        if node is None:
            return ErrorCode.coordinator_not_available
        if node == self.node_id:
            return await self._groups.write_share_state(key, snapshot)
        request = write_request.WriteShareGroupStateRequest(group_id=key.group_id, topics=(
            write_request.WriteStateData(topic_id=key.topic_id, partitions=(write_request.PartitionData(
                partition=i32(key.partition), state_epoch=i32(snapshot.state_epoch),
                leader_epoch=i32(snapshot.leader_epoch), start_offset=i64(snapshot.start_offset),
                state_batches=tuple(write_request.StateBatch(
                    first_offset=i64(f), last_offset=i64(last), delivery_state=i8(s), delivery_count=i16(c))
                    for f, last, s, c in snapshot.state_batches)),)),))
        response = await self._call(node, request)
        if response is None:
            return ErrorCode.coordinator_not_available
        (result,) = response.results[0].partitions
        return ErrorCode(result.error_code)

    @overload
    async def _call(self, node: int, request: read_request.ReadShareGroupStateRequest
                    ) -> read_response.ReadShareGroupStateResponse | None: ...

    @overload
    async def _call(self, node: int, request: write_request.WriteShareGroupStateRequest
                    ) -> write_response.WriteShareGroupStateResponse | None: ...

    async def _call(self, node: int, request: read_request.ReadShareGroupStateRequest
                    | write_request.WriteShareGroupStateRequest) -> object | None:
        """The coordinator's answer; None when it cannot be reached."""
        try:
            return await self._send(node, request)
        except (OSError, ConnectionError) as exc:
            log.debug("%s to broker %d failed: %s", type(request).__name__, node, exc)
            return None
