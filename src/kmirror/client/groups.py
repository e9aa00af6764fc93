"""Admin methods for consumer groups (Kafka Admin `listGroups`, `describeConsumerGroups`,
`listConsumerGroupOffsets`, `alterConsumerGroupOffsets`, `deleteConsumerGroups`,
`deleteConsumerGroupOffsets`).

`GroupAdmin` is mixed into `kmirror.client.admin.Admin`; it needs only `self.cluster`.
Routing is Kafka's: ListGroups goes to every broker of the cluster (each lists the groups it
coordinates) and the answers are merged; every other request goes to the group's
coordinator (FindCoordinator, retried while COORDINATOR_NOT_AVAILABLE / LOAD_IN_PROGRESS /
NOT_COORDINATOR). `alter_consumer_group_offsets` commits with generation -1 and an empty
member id, which a group coordinator accepts only while the group has no members.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.client.cluster import Cluster
from kmirror.client.errors import KafkaClientError, KafkaError, KafkaProtocolError, check
from kmirror.client.metadata import BrokerMetadata
from kmirror.protocol.consumer_protocol import ConsumerProtocolError, decode_assignment
from kmirror.protocol.entities import build, has_field, nested
from kmirror.types import TopicPartition

OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, DESCRIBE_GROUPS, LIST_GROUPS = 8, 9, 10, 15, 16
DELETE_GROUPS, OFFSET_DELETE, CONSUMER_GROUP_DESCRIBE = 42, 47, 69
CONSUMER_PROTOCOL_TYPE = "consumer"
GROUP_KEY_TYPE = 0
_COORDINATOR_RETRIES = 10
OFFSET_FETCH_GROUPS = 256
"""Groups in one OffsetFetch (Kafka's Admin sends a coordinator all of them at once): the
coordinator answers each request in one go, so a bound keeps other clients' requests from
waiting behind thousands of groups; the chunks are in flight together."""
COMMITS_IN_FLIGHT = 32
_COORDINATOR_ERRORS = frozenset({int(ErrorCode.coordinator_not_available),
                                 int(ErrorCode.coordinator_load_in_progress), int(ErrorCode.not_coordinator)})


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str  # "" when the broker's ListGroups version reports none
    group_type: str = ""  # "classic" or "consumer" (KIP-848); "" before ListGroups v5


@dataclass(frozen=True, slots=True)
class MemberDescription:
    """Kafka's `MemberDescription`. The epochs, the target assignment and `upgraded` are a
    KIP-848 group's (None for a classic group); `upgraded` is False for a classic member of a
    consumer group being migrated online (ConsumerGroupDescribe v1's MemberType)."""

    consumer_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: frozenset[TopicPartition]
    target_assignment: frozenset[TopicPartition] | None = None
    member_epoch: int | None = None
    upgraded: bool | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    """Kafka's `ConsumerGroupDescription`: `type` is "classic" or "consumer", `state` Kafka's
    group state name (`Stable`, `Empty`, `PreparingRebalance`, `Assigning`, ..., `Dead` for a
    group that does not exist), `partition_assignor` the classic group's protocol or the
    consumer group's assignor."""

    group_id: str
    is_simple_consumer_group: bool
    members: tuple[MemberDescription, ...]
    partition_assignor: str
    type: str
    state: str
    coordinator: BrokerMetadata
    group_epoch: int | None = None
    target_assignment_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""


class GroupAdmin:
    cluster: Cluster

    async def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[ListedGroup]:
        """Every group of every broker (asked together), sorted by id; with `states` (Kafka's
        state names) or `types` (`classic`, `consumer`) only those the brokers match
        (ListGroups v4 / v5)."""
        await self.cluster.refresh([])

        async def list_at(broker_id: int) -> Any:
            conn = await self.cluster.connection(broker_id)
            if LIST_GROUPS not in conn.api_versions:  # Kafka's UnsupportedVersionException
                raise KafkaError(ErrorCode.unsupported_version, f"{conn.address} does not support ListGroups",
                                 f"ListGroups on broker {broker_id}")
            response = await conn.send(conn.build_request(LIST_GROUPS, states_filter=tuple(states),
                                                          types_filter=tuple(types)))
            check(response.error_code, None, f"ListGroups on broker {broker_id}")
            return response

        out: dict[str, ListedGroup] = {}
        for response in await asyncio.gather(*map(list_at, sorted(self.cluster.metadata.brokers))):
            for g in response.groups:
                out[g.group_id] = ListedGroup(g.group_id, g.protocol_type, getattr(g, "group_state", "") or "",
                                              (getattr(g, "group_type", "") or "").lower())
        return [out[k] for k in sorted(out)]

    async def find_coordinator(self, group_id: str, key_type: int = GROUP_KEY_TYPE) -> Any:
        """A connection to the group's coordinator (or, with `key_type` 1, the transactional id's)."""
        return await self.cluster.connection(await self.find_coordinator_id(group_id, key_type))

    async def find_coordinator_id(self, group_id: str, key_type: int = GROUP_KEY_TYPE) -> int:
        """The broker id of the group's coordinator, known to `self.cluster.metadata`."""
        found = (await self.find_coordinator_ids((group_id,), key_type))[group_id]
        if isinstance(found, KafkaError):
            raise found
        return found

    async def find_coordinator_ids(self, keys: Iterable[str],
                                   key_type: int = GROUP_KEY_TYPE) -> dict[str, int | KafkaError]:
        """Each key's coordinator, as Kafka's Admin finds them: one FindCoordinator v4+ for
        every key (KIP-699), or with an older broker one request a key, all in flight at once.
        Keys answering COORDINATOR_NOT_AVAILABLE, LOAD_IN_PROGRESS or NOT_COORDINATOR are asked
        again; another error is the key's answer."""
        waiting, out = list(dict.fromkeys(keys)), dict[str, int | KafkaError]()
        attempt = 0
        while waiting:
            attempt += 1
            conn = await self.cluster.any_connection()
            rt = conn.request_type(FIND_COORDINATOR)
            if has_field(rt, "coordinator_keys"):
                response = await conn.send(build(rt, key_type=key_type, coordinator_keys=tuple(waiting)))
                answers = [(str(answer.key), answer) for answer in response.coordinators]
            else:
                answers = list(zip(waiting, await asyncio.gather(
                    *(conn.send(build(rt, key_type=key_type, key=key)) for key in waiting)), strict=True))
            waiting = []
            for key, answer in answers:
                code = int(answer.error_code)
                if code in _COORDINATOR_ERRORS and attempt < _COORDINATOR_RETRIES:
                    waiting.append(key)
                elif code:
                    out[key] = KafkaError(code, getattr(answer, "error_message", None), f"FindCoordinator {key}")
                else:
                    out[key] = int(answer.node_id)
            if any(isinstance(v, int) and v not in self.cluster.metadata.brokers for v in out.values()):
                await self.cluster.refresh([])
            if waiting:
                await asyncio.sleep(0.1 * attempt)
        return out

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
            return _committed(group_id, topics)
        raise AssertionError("unreachable")

    async def list_consumer_groups_offsets(
        self, group_ids: Iterable[str]
    ) -> dict[str, dict[TopicPartition, OffsetAndMetadata] | KafkaError]:
        """Every committed offset of many groups, as Kafka's Admin `listConsumerGroupOffsets`
        of a map of groups: their coordinators found together, then per coordinator one
        OffsetFetch v8+ for up to `OFFSET_FETCH_GROUPS` groups (KIP-709), or with an older
        broker one request a group, all in flight at once. A group's answer is its offsets
        (none for an unknown group) or its error; coordinator errors are retried as for one group."""
        out: dict[str, dict[TopicPartition, OffsetAndMetadata] | KafkaError] = {}
        waiting, attempt = list(dict.fromkeys(group_ids)), 0
        while waiting:
            attempt += 1
            by_node: dict[int, list[str]] = {}
            for group_id, found in (await self.find_coordinator_ids(waiting)).items():
                if isinstance(found, KafkaError):
                    out[group_id] = found
                else:
                    by_node.setdefault(found, []).append(group_id)
            answers = await asyncio.gather(*(self._fetch_offsets_at(node_id, groups)
                                             for node_id, groups in by_node.items()))
            waiting = []
            for group_id, code, topics in (answer for node_answers in answers for answer in node_answers):
                if code in _COORDINATOR_ERRORS and attempt < _COORDINATOR_RETRIES:
                    waiting.append(group_id)
                    continue
                try:
                    check(code, None, f"OffsetFetch {group_id}")
                    out[group_id] = _committed(group_id, topics)
                except KafkaError as exc:
                    out[group_id] = exc
            if waiting:
                await asyncio.sleep(0.1 * attempt)
        return out

    async def _fetch_offsets_at(self, node_id: int, group_ids: list[str]) -> list[tuple[str, int, Any]]:
        """(group, error code, topics) of each group from its coordinator `node_id`."""
        conn = await self.cluster.connection(node_id)
        rt = conn.request_type(OFFSET_FETCH)
        if not has_field(rt, "groups"):
            responses = await asyncio.gather(*(conn.send(build(rt, group_id=g, topics=None, require_stable=False))
                                               for g in group_ids))
            return [(g, int(getattr(r, "error_code", 0)), r.topics)
                    for g, r in zip(group_ids, responses, strict=True)]
        Group = nested(rt, "OffsetFetchRequestGroup")
        chunks = [group_ids[i:i + OFFSET_FETCH_GROUPS] for i in range(0, len(group_ids), OFFSET_FETCH_GROUPS)]
        responses = await asyncio.gather(*(conn.send(build(rt, require_stable=False, groups=tuple(
            build(Group, group_id=g, topics=None) for g in chunk))) for chunk in chunks))
        return [(str(g.group_id), int(g.error_code), g.topics) for r in responses for g in r.groups]

    async def alter_consumer_group_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> dict[TopicPartition, KafkaError | None]:
        """OffsetCommit as Kafka's Admin does it (generation -1, no member): partition -> None
        when committed, else its error (UNKNOWN_MEMBER_ID when the group has members)."""
        for attempt in range(1, _COORDINATOR_RETRIES + 1):
            out = await self._commit_at(await self.find_coordinator_id(group_id), group_id, offsets)
            if attempt == _COORDINATOR_RETRIES or not _coordinator_moved(out):
                return out
            await asyncio.sleep(0.1 * attempt)
        raise AssertionError("unreachable")

    async def alter_consumer_groups_offsets(
        self, offsets: Mapping[str, Mapping[TopicPartition, OffsetAndMetadata]]
    ) -> dict[str, dict[TopicPartition, KafkaError | None] | KafkaClientError]:
        """`alter_consumer_group_offsets` of many groups: their coordinators found together,
        then the commits (an OffsetCommit names one group) `COMMITS_IN_FLIGHT` at a time; a
        group whose coordinator moved meanwhile is committed again on its own. Group -> its
        partitions' results, or the error that kept the group from being committed."""
        coordinators = await self.find_coordinator_ids(offsets)
        limit = asyncio.Semaphore(COMMITS_IN_FLIGHT)

        async def commit(group_id: str) -> dict[TopicPartition, KafkaError | None] | KafkaClientError:
            found = coordinators[group_id]
            if isinstance(found, KafkaError):
                return found
            async with limit:
                try:
                    out = await self._commit_at(found, group_id, offsets[group_id])
                    if _coordinator_moved(out):
                        out = await self.alter_consumer_group_offsets(group_id, offsets[group_id])
                    return out
                except KafkaClientError as exc:
                    return exc

        return dict(zip(offsets, await asyncio.gather(*map(commit, offsets)), strict=True))

    async def _commit_at(self, node_id: int, group_id: str,
                         offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, KafkaError | None]:
        """One admin OffsetCommit of the group at broker `node_id`: partition -> its error or None."""
        by_topic: dict[str, list[tuple[int, OffsetAndMetadata]]] = {}
        for tp, om in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append((tp.partition, om))
        conn = await self.cluster.connection(node_id)
        rt = conn.request_type(OFFSET_COMMIT)
        Topic, Partition = nested(rt, "OffsetCommitRequestTopic"), nested(rt, "OffsetCommitRequestPartition")
        response = await conn.send(build(
            rt, group_id=group_id, generation_id_or_member_epoch=-1, generation_id=-1, member_id="",
            group_instance_id=None, retention_time_ms=-1,
            topics=tuple(build(Topic, name=topic, partitions=tuple(
                build(Partition, partition_index=p, committed_offset=om.offset,
                      committed_leader_epoch=om.leader_epoch, committed_metadata=om.metadata, commit_timestamp=-1)
                for p, om in parts)) for topic, parts in by_topic.items()),
        ))
        return _partition_errors(response.topics, f"OffsetCommit {group_id}")

    async def describe_consumer_groups(self, group_ids: Iterable[str]) -> dict[str, ConsumerGroupDescription]:
        """Each group as Kafka's Admin describes it: ConsumerGroupDescribe first (a KIP-848
        group), DescribeGroups when the coordinator answers GROUP_ID_NOT_FOUND there (a classic
        group, or none) or lacks that API. A group that does not exist is `Dead` with no
        members, as in Kafka 4; a classic group of another protocol type (connect, ...) raises."""
        return {g: await self._describe_consumer_group(g) for g in dict.fromkeys(group_ids)}

    async def _describe_consumer_group(self, group_id: str) -> ConsumerGroupDescription:
        classic, attempt = False, 0
        while True:
            node_id = await self.find_coordinator_id(group_id)
            conn = await self.cluster.connection(node_id)
            coordinator = self.cluster.metadata.brokers[node_id]
            kip848 = not classic and CONSUMER_GROUP_DESCRIBE in conn.api_versions
            if kip848:
                response = await conn.send(conn.build_request(CONSUMER_GROUP_DESCRIBE, group_ids=(group_id,),
                                                              include_authorized_operations=False))
                (group,) = response.groups
                code, context = int(group.error_code), f"ConsumerGroupDescribe {group_id}"
                if code == ErrorCode.group_id_not_found:
                    classic = True
                    continue
            else:
                response = await conn.send(conn.build_request(DESCRIBE_GROUPS, groups=(group_id,),
                                                              include_authorized_operations=False))
                (group,) = response.groups
                code, context = int(group.error_code), f"DescribeGroups {group_id}"
                if code == ErrorCode.group_id_not_found:  # DescribeGroups v6 (KIP-1043)
                    return ConsumerGroupDescription(group_id, True, (), "", "classic", "Dead", coordinator)
            if code in _COORDINATOR_ERRORS and attempt < _COORDINATOR_RETRIES - 1:
                attempt += 1
                await asyncio.sleep(0.1 * attempt)
                continue
            check(code, getattr(group, "error_message", None), context)
            return _consumer_group(group, coordinator) if kip848 else _classic_group(group, coordinator)

    async def delete_consumer_groups(self, group_ids: Iterable[str]) -> dict[str, KafkaError | None]:
        """DeleteGroups at each group's coordinator: group -> None when deleted, else its error
        (NON_EMPTY_GROUP while it has members, GROUP_ID_NOT_FOUND)."""
        out: dict[str, KafkaError | None] = {}
        for group_id in dict.fromkeys(group_ids):
            for attempt in range(_COORDINATOR_RETRIES):
                conn = await self.find_coordinator(group_id)
                response = await conn.send(conn.build_request(DELETE_GROUPS, groups_names=(group_id,)))
                (result,) = response.results
                code = int(result.error_code)
                if code in _COORDINATOR_ERRORS and attempt < _COORDINATOR_RETRIES - 1:
                    await asyncio.sleep(0.1 * (attempt + 1))
                    continue
                out[group_id] = KafkaError(code, None, f"DeleteGroups {group_id}") if code else None
                break
        return out

    async def delete_consumer_group_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, KafkaError | None]:
        """OffsetDelete (KIP-496): partition -> None when its committed offset is gone (or there
        was none), else its error (GROUP_SUBSCRIBED_TO_TOPIC while a member consumes the topic).
        A group-level error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP) raises `KafkaError`."""
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(set(partitions)):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        for attempt in range(_COORDINATOR_RETRIES):
            conn = await self.find_coordinator(group_id)
            rt = conn.request_type(OFFSET_DELETE)
            Topic, Partition = nested(rt, "OffsetDeleteRequestTopic"), nested(rt, "OffsetDeleteRequestPartition")
            response = await conn.send(build(rt, group_id=group_id, topics=tuple(
                build(Topic, name=topic, partitions=tuple(build(Partition, partition_index=p) for p in parts))
                for topic, parts in by_topic.items())))
            code = int(response.error_code)
            if code in _COORDINATOR_ERRORS and attempt < _COORDINATOR_RETRIES - 1:
                await asyncio.sleep(0.1 * (attempt + 1))
                continue
            check(code, None, f"OffsetDelete {group_id}")
            return _partition_errors(response.topics, f"OffsetDelete {group_id}")
        raise AssertionError("unreachable")


def _consumer_group(group: Any, coordinator: BrokerMetadata) -> ConsumerGroupDescription:
    """A ConsumerGroupDescribe group (KIP-848), as Kafka's `DescribeConsumerGroupsHandler`."""

    def partitions(assignment: Any) -> frozenset[TopicPartition]:
        return frozenset(TopicPartition(t.topic_name, int(p)) for t in assignment.topic_partitions
                         for p in t.partitions)

    members = tuple(
        MemberDescription(
            m.member_id, m.instance_id, m.client_id, m.client_host, partitions(m.assignment),
            partitions(m.target_assignment), int(m.member_epoch),
            None if int(getattr(m, "member_type", -1)) < 0 else int(m.member_type) == 1,
        )
        for m in group.members
    )
    return ConsumerGroupDescription(group.group_id, False, members, group.assignor_name, "consumer", group.group_state,
                                    coordinator, int(group.group_epoch), int(group.assignment_epoch))


def _classic_group(group: Any, coordinator: BrokerMetadata) -> ConsumerGroupDescription:
    """A DescribeGroups group: a consumer group only with the `consumer` protocol type, or
    none (a group that only commits offsets: Kafka's simple consumer group)."""
    if group.protocol_type not in (CONSUMER_PROTOCOL_TYPE, ""):
        raise KafkaClientError(f"GroupId {group.group_id} is not a consumer group ({group.protocol_type}).")
    members = tuple(
        MemberDescription(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                          assigned_partitions(bytes(m.member_assignment)))
        for m in group.members
    )
    return ConsumerGroupDescription(group.group_id, group.protocol_type == "", members, group.protocol_data,
                                    "classic", group.group_state, coordinator)


def assigned_partitions(assignment: bytes) -> frozenset[TopicPartition]:
    """A classic `consumer` member's assigned partitions, as DescribeGroups returns the
    assignment; none for an empty one (a member of a group not yet Stable)."""
    if not assignment:
        return frozenset()
    try:
        partitions = decode_assignment(assignment).partitions
    except ConsumerProtocolError as exc:
        raise KafkaProtocolError(f"undecodable consumer protocol assignment: {exc}") from exc
    return frozenset(TopicPartition(topic, p) for topic, ps in partitions for p in ps)


def _committed(group_id: str, topics: Iterable[Any] | None) -> dict[TopicPartition, OffsetAndMetadata]:
    """An OffsetFetch answer's committed offsets (a partition without one, offset -1, left out;
    librdkafka's mock cluster answers a fetch of all topics with none: null)."""
    out: dict[TopicPartition, OffsetAndMetadata] = {}
    for t in topics or ():
        for p in t.partitions:
            tp = TopicPartition(t.name, int(p.partition_index))
            check(p.error_code, None, f"OffsetFetch {group_id} {tp}")
            if int(p.committed_offset) >= 0:
                out[tp] = OffsetAndMetadata(int(p.committed_offset), int(getattr(p, "committed_leader_epoch", -1)),
                                            p.metadata or "")
    return out


def _coordinator_moved(results: Mapping[TopicPartition, KafkaError | None]) -> bool:
    return any(e is not None and e.error_code in _COORDINATOR_ERRORS for e in results.values())


def _partition_errors(topics: Iterable[Any], context: str) -> dict[TopicPartition, KafkaError | None]:
    """Each partition of an answer: None, or its error named with `context`."""
    out: dict[TopicPartition, KafkaError | None] = {}
    for t in topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, int(p.partition_index))
            code = int(p.error_code)
            out[tp] = KafkaError(code, None, f"{context} {tp}") if code else None
    return out
