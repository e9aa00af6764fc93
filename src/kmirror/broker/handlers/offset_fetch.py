"""OffsetFetch (key 9, v1-v9: one group up to v7, several from v8; v10 names topics by id
and is not served yet). With `require_stable` (v7+) a partition whose group has offsets
pending in an open transaction answers UNSTABLE_OFFSET_COMMIT (the client retries), as
Kafka's does; without it only committed offsets are returned. From v9 a KIP-848 member names
itself and its member epoch (UNKNOWN_MEMBER_ID / STALE_MEMBER_EPOCH as Kafka).

Authorization (Kafka's): DESCRIBE on the group (else GROUP_AUTHORIZATION_FAILED), and on
each topic: a requested topic without it is answered TOPIC_AUTHORIZATION_FAILED, and
fetching all of a group's offsets leaves such topics out."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import DESCRIBE, GROUP, TOPIC
from kmirror.broker.services import BrokerServices
from kmirror.coordinator.results import FetchedOffset, FetchOffsetsResult
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


@api(9, "OffsetFetch", 1, 9)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    coordinator = _AuthorizedOffsets(services, ctx)
    stable = bool(getattr(request, "require_stable", False))
    if ctx.api_version >= 8:
        Group = nested(rt, "OffsetFetchResponseGroup")
        groups = []
        for g in request.groups:
            result = coordinator.fetch_offsets(group_id=g.group_id, topics=_topics(g.topics), require_stable=stable,
                                               member_id=getattr(g, "member_id", None),
                                               member_epoch=getattr(g, "member_epoch", -1))
            groups.append(
                Group(group_id=g.group_id, topics=_response_topics(rt, result, "OffsetFetchResponseTopics",
                                                                   "OffsetFetchResponsePartitions"),
                      error_code=result.error)
            )
        return build(rt, throttle_time=datetime.timedelta(0), groups=tuple(groups))
    requested = _topics(request.topics)
    result = coordinator.fetch_offsets(group_id=request.group_id, topics=requested, require_stable=stable)
    if ctx.api_version < 2 and result.error != ErrorCode.none:
        # v0-1 have no group-level error: every requested partition carries it.
        result = FetchOffsetsResult(result.group_id, ErrorCode.none, tuple(
            _errored(topic, p, result.error) for topic, parts in (requested or []) for p in parts
        ))
    topics = _response_topics(rt, result, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition")
    return build(rt, throttle_time=datetime.timedelta(0), topics=topics, error_code=result.error)


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


def _response_topics(rt: type, result: FetchOffsetsResult, topic_name: str, partition_name: str) -> tuple[Any, ...]:
    Topic = nested(rt, topic_name)
    Partition = nested(rt, partition_name)
    by_topic: dict[str, list[Any]] = {}
    for o in result.offsets:
        by_topic.setdefault(o.topic, []).append(
            build(Partition, partition_index=o.partition, committed_offset=o.offset,
                  committed_leader_epoch=o.leader_epoch, metadata=o.metadata, error_code=o.error)
        )
    return tuple(Topic(name=name, partitions=tuple(parts)) for name, parts in by_topic.items())
