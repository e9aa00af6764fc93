"""Admin methods for consumer groups (Kafka Admin `listConsumerGroups`,
`listConsumerGroupOffsets`, `alterConsumerGroupOffsets`).

`GroupAdmin` is mixed into `kmirror.client.admin.Admin`; it needs only `self.cluster`.
Routing is Kafka's: ListGroups goes to every broker of the cluster (each lists the groups it
coordinates) and the answers are merged; OffsetFetch and OffsetCommit go to the group's
coordinator (FindCoordinator, retried while COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS /
NOT_COORDINATOR). `alter_consumer_group_offsets` commits with generation -1 and an empty
member id, which a group coordinator accepts only while the group has no members.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.client.cluster import Cluster
from kmirror.client.errors import KafkaError, check
from kmirror.protocol.entities import build, has_field, nested
from kmirror.types import TopicPartition

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, LIST_GROUPS = 8, 9, 10, 16
GROUP_KEY_TYPE = 0
_COORDINATOR_RETRIES = 10
_COORDINATOR_ERRORS = frozenset({int(ErrorCode.coordinator_not_available),
                                 int(ErrorCode.coordinator_load_in_progress), int(ErrorCode.not_coordinator)})


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str  # "" when the broker's ListGroups version reports none


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""


class GroupAdmin:
    cluster: Cluster

    async def list_groups(self) -> list[ListedGroup]:
        """Every group of every broker, sorted by id."""
        await self.cluster.refresh([])
        out: dict[str, ListedGroup] = {}
        for broker_id in sorted(self.cluster.metadata.brokers):
            conn = await self.cluster.connection(broker_id)
            response = await conn.send(conn.build_request(LIST_GROUPS, states_filter=(), types_filter=()))
            check(response.error_code, None, f"ListGroups on broker {broker_id}")
            for g in response.groups:
                out[g.group_id] = ListedGroup(g.group_id, g.protocol_type, getattr(g, "group_state", "") or "")
        return [out[k] for k in sorted(out)]

    async def find_coordinator(self, group_id: str, key_type: int = GROUP_KEY_TYPE) -> Any:
        """A connection to the group's coordinator (or, with `key_type` 1, the transactional id's)."""
        for attempt in range(_COORDINATOR_RETRIES):
            conn = await self.cluster.any_connection()
            rt = conn.request_type(FIND_COORDINATOR)
            if has_field(rt, "coordinator_keys"):
                response = await conn.send(build(rt, key_type=key_type, coordinator_keys=(group_id,)))
                (answer,) = response.coordinators
            else:
                answer = await conn.send(build(rt, key_type=key_type, key=group_id))
            code = int(answer.error_code)
            if code in _COORDINATOR_ERRORS and attempt < _COORDINATOR_RETRIES - 1:
                await asyncio.sleep(0.1 * (attempt + 1))
                continue
            check(code, getattr(answer, "error_message", None), f"FindCoordinator {group_id}")
            if int(answer.node_id) not in self.cluster.metadata.brokers:
                await self.cluster.refresh([])
            return await self.cluster.connection(int(answer.node_id))
        raise AssertionError("unreachable")

    async def list_consumer_group_offsets(self, group_id: str, *, require_stable: bool = False,
                                          timeout_ms: int = 60_000) -> dict[TopicPartition, OffsetAndMetadata]:
        """Every committed offset of the group (an unknown group has none). With
        `require_stable` (KIP-447) a partition whose transactional commit is still pending
        answers UNSTABLE_OFFSET_COMMIT, retried here until `timeout_ms`, as Kafka's consumer."""
        deadline = asyncio.get_running_loop().time() + timeout_ms / 1000
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._fetch_offsets(group_id, require_stable)
            except KafkaError as exc:
                if exc.error_code != ErrorCode.unstable_offset_commit or \
                        asyncio.get_running_loop().time() >= deadline:
                    raise
            await asyncio.sleep(min(0.05 * attempt, 0.5))

    async def _fetch_offsets(self, group_id: str, require_stable: bool) -> dict[TopicPartition, OffsetAndMetadata]:
        for attempt in range(_COORDINATOR_RETRIES):
            conn = await self.find_coordinator(group_id)
            rt = conn.request_type(OFFSET_FETCH)
            if has_field(rt, "groups"):
                Group = nested(rt, "OffsetFetchRequestGroup")
                response = await conn.send(build(rt, groups=(build(Group, group_id=group_id, topics=None),),
                                                 require_stable=require_stable))
                (group,) = response.groups
                code, topics = int(group.error_code), group.topics
            else:
                response = await conn.send(build(rt, group_id=group_id, topics=None, require_stable=require_stable))
                code, topics = int(getattr(response, "error_code", 0)), response.topics
            if code in _COORDINATOR_ERRORS and attempt < _COORDINATOR_RETRIES - 1:
                await asyncio.sleep(0.1 * (attempt + 1))
                continue
            check(code, None, f"OffsetFetch {group_id}")
            out: dict[TopicPartition, OffsetAndMetadata] = {}
            for t in topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, int(p.partition_index))
                    check(p.error_code, None, f"OffsetFetch {group_id} {tp}")
                    if int(p.committed_offset) >= 0:
                        out[tp] = OffsetAndMetadata(int(p.committed_offset),
                                                    int(getattr(p, "committed_leader_epoch", -1)), p.metadata or "")
            return out
        raise AssertionError("unreachable")

    async def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> dict[TopicPartition, KafkaError | None]:
        """OffsetCommit as Kafka's Admin does it (generation -1, no member): partition -> None
        when committed, else its error (UNKNOWN_MEMBER_ID when the group has members)."""
        by_topic: dict[str, list[tuple[int, OffsetAndMetadata]]] = {}
        for tp, om in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append((tp.partition, om))
        for attempt in range(_COORDINATOR_RETRIES):
            conn = await self.find_coordinator(group_id)
            rt = conn.request_type(OFFSET_COMMIT)
            Topic, Partition = nested(rt, "OffsetCommitRequestTopic"), nested(rt, "OffsetCommitRequestPartition")
            request = build(
                rt, group_id=group_id, generation_id_or_member_epoch=-1, generation_id=-1, member_id="",
                group_instance_id=None, retention_time_ms=-1,
                topics=tuple(build(Topic, name=topic, partitions=tuple(
                    build(Partition, partition_index=p, committed_offset=om.offset,
                          committed_leader_epoch=om.leader_epoch, committed_metadata=om.metadata,
                          commit_timestamp=-1)
                    for p, om in parts)) for topic, parts in by_topic.items()),
            )
            response = await conn.send(request)
            out: dict[TopicPartition, KafkaError | None] = {}
            for t in response.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, int(p.partition_index))
                    code = int(p.error_code)
                    out[tp] = KafkaError(code, None, f"OffsetCommit {group_id} {tp}") if code else None
            if attempt < _COORDINATOR_RETRIES - 1 and any(
                    e is not None and e.error_code in _COORDINATOR_ERRORS for e in out.values()):
                await asyncio.sleep(0.1 * (attempt + 1))
                continue
            return out
        raise AssertionError("unreachable")
