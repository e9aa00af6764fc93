"""OffsetFetch (key 9, v1-v10: one group up to v7, several from v8; from v10 topics are named
by id, Kafka 4.1's KAFKA-14691: a requested id the cluster does not know answers
UNKNOWN_TOPIC_ID for its partitions, and fetching all of a group's offsets leaves out the
topics the cluster no longer has, which have no id to name them by). With `require_stable`
(v7+) a partition whose group has offsets pending in an open transaction answers
UNSTABLE_OFFSET_COMMIT (the client retries), as Kafka's does; without it only committed
offsets are returned. From v9 a KIP-848 member names itself and its member epoch
(UNKNOWN_MEMBER_ID / STALE_MEMBER_EPOCH as Kafka).

Authorization (Kafka's): DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED), and on
each topic: a requested topic without it is answered TOPIC_AUTHORIZATION_FAILED, and
fetching all of a group's offsets leaves such topics out."""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import DESCRIBE, GROUP, TOPIC
from kmirror.broker.services import BrokerServices
from kmirror.broker.topic_ids import TOPIC_IDS_VERSION, TopicIds
from kmirror.coordinator.results import FetchedOffset, FetchOffsetsResult
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


@api(9, "OffsetFetch", 1, 10)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    coordinator = _AuthorizedOffsets(services, ctx)
    stable = bool(getattr(request, "require_stable", False))
    ids = TopicIds(getattr(services.metadata, "image", None))
    if ctx.api_version >= 8:
        Group = nested(rt, "OffsetFetchResponseGroup")
        groups = []
        for g in request.groups:
            if ctx.api_version >= TOPIC_IDS_VERSION:
                result = _fetch_by_ids(coordinator, ids, g, require_stable=stable)
            else:
                result = coordinator.fetch_offsets(group_id=g.group_id, topics=_topics(g.topics), require_stable=stable,
                                                   member_id=getattr(g, "member_id", None),
                                                   member_epoch=getattr(g, "member_epoch", -1))
            groups.append(Group(group_id=g.group_id, error_code=result.error, topics=_response_topics(
                rt, result, "OffsetFetchResponseTopics", "OffsetFetchResponsePartitions", ids, ctx.api_version)))
        return build(rt, throttle_time=datetime.timedelta(0), groups=tuple(groups))
    requested = _topics(request.topics)
    result = coordinator.fetch_offsets(group_id=request.group_id, topics=requested, require_stable=stable)
    if ctx.api_version < 2 and result.error != ErrorCode.none:
        # v0-1 have no group-level error: every requested partition carries it.
        result = FetchOffsetsResult(result.group_id, ErrorCode.none, tuple(
            _errored(topic, p, result.error) for topic, parts in (requested or []) for p in parts
        ))
    topics = _response_topics(rt, result, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition", ids,
                              ctx.api_version)
    return build(rt, throttle_time=datetime.timedelta(0), topics=topics, error_code=result.error)


def _fetch_by_ids(coordinator: _AuthorizedOffsets, ids: TopicIds, group: Any, *,
                  require_stable: bool) -> FetchOffsetsResult:
    """One group of a v10+ request: its topics' ids resolved to names, the offsets fetched by
    name; an unknown id's partitions answered UNKNOWN_TOPIC_ID, and with every topic asked
    for, the topics without an id left out."""
    kwargs = {"require_stable": require_stable, "member_id": group.member_id, "member_epoch": group.member_epoch}
    if group.topics is None:
        result = coordinator.fetch_offsets(group_id=group.group_id, topics=None, **kwargs)
        return replace(result, offsets=tuple(o for o in result.offsets if ids.id_of(o.topic) is not None))
    named: list[tuple[str, list[int]]] = []
    unknown: list[FetchedOffset] = []
    for t in group.topics:
        name = ids.name_of(t.topic_id)
        if name is None:
            placeholder = ids.unknown(t.topic_id)
            unknown.extend(_errored(placeholder, int(p), ErrorCode.unknown_topic_id) for p in t.partition_indexes)
        else:
            named.append((name, [int(p) for p in t.partition_indexes]))
    result = coordinator.fetch_offsets(group_id=group.group_id, topics=named, **kwargs)
    if result.error != ErrorCode.none:  # the group's error answers for every topic
        return result
    return replace(result, offsets=result.offsets + tuple(unknown))


class _AuthorizedOffsets:
    """The group coordinator's `fetch_offsets`, authorized for the request."""

    def __init__(self, services: BrokerServices, ctx: RequestContext) -> None:
        self.services, self.ctx = services, ctx

    def fetch_offsets(self, *, group_id: str, topics: list[tuple[str, list[int]]] | None,
                      **kwargs: Any) -> FetchOffsetsResult:
        authorization = self.services.authorization
        if not authorization.authorize(self.ctx, DESCRIBE, GROUP, group_id):
            return FetchOffsetsResult(group_id, ErrorCode.group_authorization_failed)
        if authorization.unrestricted(self.ctx):
            return self.services.groups.fetch_offsets(group_id=group_id, topics=topics, **kwargs)
        if topics is None:
            result = self.services.groups.fetch_offsets(group_id=group_id, topics=None, **kwargs)
            describable = authorization.filter(self.ctx, DESCRIBE, TOPIC, {o.topic for o in result.offsets})
            return FetchOffsetsResult(result.group_id, result.error,
                                      tuple(o for o in result.offsets if o.topic in describable))
        describable = authorization.filter(self.ctx, DESCRIBE, TOPIC, (t for t, _ in topics))
        result = self.services.groups.fetch_offsets(
            group_id=group_id, topics=[(t, ps) for t, ps in topics if t in describable], **kwargs)
        refused = tuple(_errored(t, p, ErrorCode.topic_authorization_failed)
                        for t, ps in topics if t not in describable for p in ps)
        return FetchOffsetsResult(result.group_id, result.error, result.offsets + refused)


def _topics(topics: Any) -> list[tuple[str, list[int]]] | None:
    if topics is None:
        return None
    return [(t.name, [int(p) for p in t.partition_indexes]) for t in topics]


def _errored(topic: str, partition: int, error: ErrorCode) -> FetchedOffset:
    return FetchedOffset(topic, partition, -1, -1, "", error)


def _response_topics(rt: type, result: FetchOffsetsResult, topic_name: str, partition_name: str, ids: TopicIds,
                     version: int) -> tuple[Any, ...]:
    Topic = nested(rt, topic_name)
    Partition = nested(rt, partition_name)
    by_topic: dict[str, list[Any]] = {}
    for o in result.offsets:
        by_topic.setdefault(o.topic, []).append(
            build(Partition, partition_index=o.partition, committed_offset=o.offset,
                  committed_leader_epoch=o.leader_epoch, metadata=o.metadata, error_code=o.error)
        )
    return tuple(Topic(**ids.naming(version, name), partitions=tuple(parts)) for name, parts in by_topic.items())
