"""ShareAcknowledge (key 79, v1; KIP-932): a share group member acknowledges records it
acquired, outside a ShareFetch (Kafka `KafkaApis.handleShareAcknowledgeRequest`).

The share session must exist (epoch 0 is INVALID_SHARE_SESSION_EPOCH); a final request
(epoch -1) ends it after its acknowledgements and releases what the member still holds. Each
partition is answered with its acknowledgement's error: INVALID_RECORD_STATE for a record the
member does not hold (its lock expired, or another member's), INVALID_REQUEST for malformed
batches, NOT_LEADER_OR_FOLLOWER with the current leader where this node does not lead, or
the error of storing the share partition's state at its coordinator (the acknowledgement is
answered once stored).
Authorization as ShareFetch's: READ on the group, READ on each topic.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import READ, TOPIC
from kmirror.broker.services import BrokerServices
from kmirror.broker.share_partitions import (
    AcknowledgementBatch,
    SharePartitionManager,
    request_member,
    share_manager,
)
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.share.partition import AcknowledgeType
from kmirror.types import TopicPartition

_LEADER_HINT_ERRORS = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch})
_MESSAGES = {
    ErrorCode.share_session_not_found: "The share session was not found.",
    ErrorCode.invalid_share_session_epoch: "The share session epoch is invalid.",
    ErrorCode.share_session_limit_reached: "The limit of share sessions of this broker is reached.",
    ErrorCode.invalid_request: "The share session request is invalid.",
}


def top_level_error(error: ErrorCode) -> str | None:
    return _MESSAGES.get(error)


def acknowledgements(rm: Any, topics: Iterable[Any]) -> dict[TopicPartition, list[AcknowledgementBatch]]:
    """The request's acknowledgement batches by partition (topics the node does not know
    are left out: their partitions answer UNKNOWN_TOPIC_ID)."""
    out: dict[TopicPartition, list[AcknowledgementBatch]] = {}
    for topic in topics:
        name = rm.topic_name(topic.topic_id)
        if name is None:
            continue
        for p in topic.partitions:
            batches = [(int(b.first_offset), int(b.last_offset), _types(b.acknowledge_types))
                       for b in p.acknowledgement_batches]
            if batches:
                out.setdefault(TopicPartition(name, int(p.partition_index)), []).extend(batches)
    return out


def _types(raw: Iterable[Any]) -> tuple[AcknowledgeType, ...]:
    try:
        return tuple(AcknowledgeType(int(t)) for t in raw)
    except ValueError:
        return ()  # an unknown type: the batch is malformed (INVALID_REQUEST)


def denied_topics(services: BrokerServices, ctx: RequestContext, partitions: Iterable[TopicPartition]) -> set[str]:
    authorization = services.authorization
    if authorization.unrestricted(ctx):
        return set()
    tps = list(partitions)
    return {tp.topic for tp in tps} - set(authorization.filter(ctx, READ, TOPIC, (tp.topic for tp in tps)))


async def acknowledge_all(manager: SharePartitionManager, group_id: str, member_id: str,
                          acks: dict[TopicPartition, list[AcknowledgementBatch]], denied: set[str],
                          now_ms: int) -> dict[TopicPartition, ErrorCode]:
    return {tp: (ErrorCode.topic_authorization_failed if tp.topic in denied
                 else await manager.acknowledge(group_id, member_id, tp, batches, now_ms))
            for tp, batches in acks.items()}


def leader_fields(services: BrokerServices, rt: type, tp: TopicPartition | None, error: ErrorCode) -> Any:
    """The answer's `current_leader`: where the leader is now after a leader error (KIP-951),
    else unknown (-1, -1)."""
    leader_id, leader_epoch = -1, -1
    if tp is not None and error in _LEADER_HINT_ERRORS:
        leader_id, leader_epoch = services.replica_manager.current_leader(tp)
    return nested(rt, "LeaderIdAndEpoch")(leader_id=leader_id, leader_epoch=leader_epoch)


@api(79, "ShareAcknowledge", 1, 1)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    rm = services.replica_manager
    manager = share_manager(services)
    key = request_member(request)
    if key is None:
        return _answer(rt, ErrorCode.invalid_request, "GroupId and MemberId must be set.")
    group_id, member_id = key
    now_ms = services.clock.monotonic_ms()
    final = manager.sessions.acknowledge_context(key, int(request.share_session_epoch), now_ms)
    if isinstance(final, ErrorCode):
        return _answer(rt, final, top_level_error(final))
    acks = acknowledgements(rm, request.topics)
    errors = await acknowledge_all(manager, group_id, member_id, acks, denied_topics(services, ctx, acks), now_ms)
    if final:
        session = manager.sessions.remove(key)
        if session is not None:
            await manager.release(group_id, member_id, session.partitions)
    PartitionData = nested(rt, "PartitionData")
    Topic = nested(rt, "ShareAcknowledgeTopicResponse")
    topics: dict[uuid.UUID, list[Any]] = {}
    for topic in request.topics:
        name = rm.topic_name(topic.topic_id)
        for p in topic.partitions:
            tp = TopicPartition(name, int(p.partition_index)) if name is not None else None
            error = ErrorCode.unknown_topic_id if tp is None else errors.get(tp, ErrorCode.none)
            topics.setdefault(topic.topic_id, []).append(build(
                PartitionData, partition_index=int(p.partition_index), error_code=error, error_message=None,
                current_leader=leader_fields(services, rt, tp, error)))
    return build(rt, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, error_message=None,
                 responses=tuple(build(Topic, topic_id=t, partitions=tuple(ps)) for t, ps in topics.items()),
                 node_endpoints=())


def _answer(rt: type, error: ErrorCode, message: str | None) -> Any:
    return build(rt, throttle_time=datetime.timedelta(0), error_code=error, error_message=message, responses=(),
                 node_endpoints=())
