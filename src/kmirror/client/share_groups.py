"""Share group admin operations (KIP-932): Kafka's `Admin.describeShareGroups`,
`listShareGroupOffsets` and `alterShareGroupOffsets`, at each group's coordinator, retried
while the coordinator moves or loads."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kmirror.client.errors import KafkaError, check
from kmirror.client.groups import (
    _COORDINATOR_ERRORS,
    _COORDINATOR_RETRIES,
    ConsumerGroupDescription,
    GroupAdmin,
    MemberDescription,
)
from kmirror.client.metadata import BrokerMetadata
from kmirror.protocol.entities import build, nested
from kmirror.types import TopicPartition

SHARE_GROUP_DESCRIBE, DESCRIBE_SHARE_GROUP_OFFSETS, ALTER_SHARE_GROUP_OFFSETS = 77, 90, 91


class ShareGroupAdmin(GroupAdmin):
    async def describe_share_groups(self, group_ids: Iterable[str]) -> dict[str, ConsumerGroupDescription]:
        """Each share group as Kafka's `ShareGroupDescription` (type "share"); a group that does
        not exist, or is not a share group, raises GROUP_ID_NOT_FOUND."""
        return {g: await self._describe_share_group(g) for g in dict.fromkeys(group_ids)}

    async def _describe_share_group(self, group_id: str) -> ConsumerGroupDescription:
        node_id, response = await self._at_coordinator(group_id, "ShareGroupDescribe", lambda conn: conn.build_request(
            SHARE_GROUP_DESCRIBE, group_ids=(group_id,), include_authorized_operations=False),
            lambda r: r.groups[0])
        return _share_group(response.groups[0], self.cluster.metadata.brokers[node_id])

    async def _at_coordinator(self, group_id: str, name: str, request: Callable[[Any], Any],
                              group_result: Callable[[Any], Any]) -> tuple[int, Any]:
        """(coordinator id, response) of `request` sent to the group's coordinator, sent again
        while the coordinator moves or loads; a group-level error (`group_result`'s
        error_code) raises."""
        for attempt in range(_COORDINATOR_RETRIES):
            node_id = await self.find_coordinator_id(group_id)
            conn = await self.cluster.connection(node_id)
            response = await conn.send(request(conn))
            result = group_result(response)
            code = int(result.error_code)
            if code in _COORDINATOR_ERRORS and attempt < _COORDINATOR_RETRIES - 1:
                await asyncio.sleep(0.1 * (attempt + 1))
                continue
            check(code, result.error_message, f"{name} {group_id}")
            return node_id, response
        raise AssertionError("unreachable: the last attempt returns or raises")

    async def list_share_group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """The group's start offset of every partition it has one for (-1: none stored)."""
        _, response = await self._at_coordinator(group_id, "DescribeShareGroupOffsets", lambda conn: conn.build_request(
            DESCRIBE_SHARE_GROUP_OFFSETS, groups=(build(nested(
                conn.request_type(DESCRIBE_SHARE_GROUP_OFFSETS), "DescribeShareGroupOffsetsRequestGroup"),
                group_id=group_id, topics=None),)), lambda r: r.groups[0])
        group = response.groups[0]
        out: dict[TopicPartition, int] = {}
        for topic in group.topics:
            for p in topic.partitions:
                check(int(p.error_code), p.error_message, f"DescribeShareGroupOffsets {group_id} {topic.topic_name}")
                out[TopicPartition(topic.topic_name, int(p.partition_index))] = int(p.start_offset)
        return out

    async def alter_share_group_offsets(self, group_id: str, offsets: Mapping[TopicPartition, int]
                                        ) -> dict[TopicPartition, KafkaError | None]:
        """Set the group's start offsets (an empty group only; created if missing): each
        partition -> None, or its error. A group-level refusal raises."""
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append((tp.partition, offset))

        def request(conn: Any) -> Any:
            rt = conn.request_type(ALTER_SHARE_GROUP_OFFSETS)
            Topic, Partition = (nested(rt, "AlterShareGroupOffsetsRequestTopic"),
                                nested(rt, "AlterShareGroupOffsetsRequestPartition"))
            return conn.build_request(ALTER_SHARE_GROUP_OFFSETS, group_id=group_id, topics=tuple(
                build(Topic, topic_name=name, partitions=tuple(
                    build(Partition, partition_index=p, start_offset=o) for p, o in parts))
                for name, parts in by_topic.items()))

        _, response = await self._at_coordinator(group_id, "AlterShareGroupOffsets", request, lambda r: r)
        return {TopicPartition(t.topic_name, int(p.partition_index)):
                KafkaError(int(p.error_code), p.error_message, f"AlterShareGroupOffsets {group_id}")
                if int(p.error_code) else None
                for t in response.responses for p in t.partitions}


def _share_group(group: Any, coordinator: BrokerMetadata) -> ConsumerGroupDescription:
    def partitions(assignment: Any) -> frozenset[TopicPartition]:
        return frozenset(TopicPartition(t.topic_name, int(p)) for t in assignment.topic_partitions
                         for p in t.partitions)

    members = tuple(MemberDescription(m.member_id, None, m.client_id, m.client_host, partitions(m.assignment),
                                      None, int(m.member_epoch)) for m in group.members)
    return ConsumerGroupDescription(group.group_id, False, members, group.assignor_name, "share", group.group_state,
                                    coordinator, int(group.group_epoch), int(group.assignment_epoch))

