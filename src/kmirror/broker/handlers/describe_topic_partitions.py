"""DescribeTopicPartitions (key 75, v0): topics and their partitions a page at a time
(KIP-966), Kafka's DescribeTopicPartitionsRequestHandler.

The topics (all of them when the request names none) are described in name order, from the
request's cursor on, until `min(response_partition_limit, max.request.partition.size.limit)`
partitions are in the response; `next_cursor` then names the first topic and partition left
out. Partitions are answered as Metadata answers them (`partition_fields`); kmirror has no
eligible leader replicas (KIP-966's ELR), so those lists are empty.

Authorization (Kafka's): DESCRIBE on each topic. Listing all topics leaves out the
undescribable ones; a topic asked for by name without DESCRIBE is answered
TOPIC_AUTHORIZATION_FAILED with a zero topic id, whether it exists or not. Each described
topic carries the operations the principal may do on it.

A cursor naming a topic that the request's list does not hold is INVALID_REQUEST for every
topic asked for, as Kafka answers it.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from typing import Any

from kio.static.primitive import i32

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import DESCRIBE, TOPIC
from kmirror.broker.handlers.metadata import TOPIC_OPERATIONS, operations_bitfield, partition_fields
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.topics import is_internal_topic, validate_topic_name
from kmirror.metadata.image import MetadataImage
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode

ZERO_ID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class Page:
    """One response's worth: per topic, its partition indexes (None: the topic does not
    exist), and where the next page starts."""

    topics: list[tuple[str, range | None]]
    next_cursor: tuple[str, int] | None


def page(image: MetadataImage, names: list[str], start: tuple[str, int], limit: int) -> Page:
    """Kafka's getTopicMetadataForDescribeTopicResponse over `names` (sorted, from the cursor
    topic on): whole topics while they fit in `limit` partitions, then the part of the next
    one that fits, and the cursor of what is left."""
    remaining = limit
    out: list[tuple[str, range | None]] = []
    for name in names:
        if remaining <= 0:
            return Page(out, (name, 0) if remaining == 0 else None)
        topic = image.topics.get(name)
        if topic is None:
            out.append((name, None))
            continue
        first = max(start[1], 0) if name == start[0] else 0
        count = len(topic.partitions)
        upper = min(count, first + remaining)
        out.append((name, range(first, upper)))
        if upper < count:
            return Page(out, (name, upper))
        remaining -= max(upper - first, 0)
    return Page(out, None)


@api(75, "DescribeTopicPartitions", 0, 0)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    topic_cls = nested(rt, "DescribeTopicPartitionsResponseTopic")
    image = services.metadata.image
    authorization = services.authorization
    cursor = request.cursor
    start = (cursor.topic_name, int(cursor.partition_index)) if cursor is not None else ("", 0)
    fetch_all = not request.topics
    asked = {t.name for t in request.topics}
    if cursor is not None and not fetch_all and cursor.topic_name not in asked:
        return build(rt, throttle_time=datetime.timedelta(0), topics=tuple(
            build(topic_cls, error_code=ErrorCode.invalid_request, name=name, topic_id=ZERO_ID, partitions=())
            for name in sorted(asked)))
    candidates = {n for n in (image.topics if fetch_all else asked) if n >= start[0]}
    describable = authorization.filter(ctx, DESCRIBE, TOPIC, candidates, log_if_denied=not fetch_all)
    if start[0] not in describable:
        start = (start[0], 0)
    limit = min(services.config.max_request_partition_size_limit, int(request.response_partition_limit))
    result = page(image, sorted(describable), start, limit)

    partition_cls = nested(rt, "DescribeTopicPartitionsResponsePartition")
    live = {b.broker_id for b in image.live_brokers()}
    topics = []
    for name, indexes in result.topics:
        topic = image.topics.get(name)
        if topic is None or indexes is None:
            if fetch_all:
                continue
            invalid = validate_topic_name(name)
            topics.append(build(topic_cls, error_code=invalid.code if invalid else ErrorCode.unknown_topic_or_partition,
                                name=name, topic_id=ZERO_ID, is_internal=is_internal_topic(name), partitions=()))
            continue
        allowed = authorization.authorized_operations(ctx, TOPIC, name, TOPIC_OPERATIONS)
        partitions = tuple(
            build(partition_cls, error_code=ErrorCode.none, eligible_leader_replicas=(), last_known_elr=(),
                  **partition_fields(i, topic.partitions[i], live, image))
            for i in indexes if i in topic.partitions)
        topics.append(build(topic_cls, error_code=ErrorCode.none, name=name, topic_id=topic.topic_id,
                            is_internal=is_internal_topic(name), partitions=partitions,
                            topic_authorized_operations=i32(operations_bitfield(allowed))))
    topics += [build(topic_cls, error_code=ErrorCode.topic_authorization_failed, name=name, topic_id=ZERO_ID,
                     partitions=()) for name in sorted(candidates - describable) if not fetch_all]
    next_cursor = None
    if result.next_cursor is not None:
        next_cursor = build(nested(rt, "Cursor"), topic_name=result.next_cursor[0],
                            partition_index=i32(result.next_cursor[1]))
    return build(rt, throttle_time=datetime.timedelta(0), topics=tuple(topics), next_cursor=next_cursor)
