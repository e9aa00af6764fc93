"""Share group admin operations (KIP-932, Kafka's `Admin.describeShareGroups`): ShareGroupDescribe
at each group's coordinator, retried while the coordinator moves or loads."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.client.errors import check
from kmirror.client.groups import ConsumerGroupDescription, GroupAdmin, MemberDescription
from kmirror.client.metadata import BrokerMetadata
from kmirror.types import TopicPartition

SHARE_GROUP_DESCRIBE = 77
_RETRIES = 10
_COORDINATOR_ERRORS = frozenset({int(ErrorCode.coordinator_not_available), int(ErrorCode.coordinator_load_in_progress),
                                 int(ErrorCode.not_coordinator)})


class ShareGroupAdmin(GroupAdmin):
    async def describe_share_groups(self, group_ids: Iterable[str]) -> dict[str, ConsumerGroupDescription]:
        """Each share group as Kafka's `ShareGroupDescription` (type "share"); a group that does
        not exist, or is not a share group, raises GROUP_ID_NOT_FOUND."""
        return {g: await self._describe_share_group(g) for g in dict.fromkeys(group_ids)}

    async def _describe_share_group(self, group_id: str) -> ConsumerGroupDescription:
        for attempt in range(_RETRIES):
            node_id = await self.find_coordinator_id(group_id)
            conn = await self.cluster.connection(node_id)
            response = await conn.send(conn.build_request(SHARE_GROUP_DESCRIBE, group_ids=(group_id,),
                                                          include_authorized_operations=False))
            (group,) = response.groups
            code = int(group.error_code)
            if code in _COORDINATOR_ERRORS and attempt < _RETRIES - 1:
                await asyncio.sleep(0.1 * (attempt + 1))
                continue
            check(code, group.error_message, f"ShareGroupDescribe {group_id}")
            break
        return _share_group(group, self.cluster.metadata.brokers[node_id])


def _share_group(group: Any, coordinator: BrokerMetadata) -> ConsumerGroupDescription:
    def partitions(assignment: Any) -> frozenset[TopicPartition]:
        return frozenset(TopicPartition(t.topic_name, int(p)) for t in assignment.topic_partitions
                         for p in t.partitions)

    members = tuple(MemberDescription(m.member_id, None, m.client_id, m.client_host, partitions(m.assignment),
                                      None, int(m.member_epoch)) for m in group.members)
    return ConsumerGroupDescription(group.group_id, False, members, group.assignor_name, "share", group.group_state,
                                    coordinator, int(group.group_epoch), int(group.assignment_epoch))
