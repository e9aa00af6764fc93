"""ShareFetch (key 78, v1; KIP-932): a share group member's fetch, with its acknowledgements
piggybacked (Kafka `KafkaApis.handleShareFetchRequest`).

In order: the share session (`kmirror.share.sessions`: open, go on, or end it); the
acknowledgements, per partition (`acknowledge_error_code`, once the share partition's state
is stored at its coordinator); the share partitions loaded from their stored state; then, unless the session ends,
records acquired for the member from every partition of its session, up to `max_records`
(soft: whole batches) and `max_bytes` (the first partition with records may pass it by one
batch). When nothing was acquired the request waits up to `max_wait_ms` for appends to its
partitions. Each answered partition carries the batches holding its acquired records, as
stored, and the acquired ranges with their delivery counts; `acquisition_lock_timeout_ms` is
how long the member holds them. A final request (epoch -1) releases what the member still
holds in its session's partitions.

Authorization (Kafka's): READ on the group (before the handler) and READ on each topic, else
that topic's partitions are answered TOPIC_AUTHORIZATION_FAILED and not read.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.handlers.share_acknowledge import (
    acknowledge_all,
    acknowledgements,
    denied_topics,
    leader_fields,
    top_level_error,
)
from kmirror.broker.purgatory import purgatory_for
from kmirror.broker.services import BrokerServices
from kmirror.broker.share_partitions import Acquired, request_member, share_manager
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.outcomes import PartitionError
from kmirror.types import TopicPartition


@api(78, "ShareFetch", 1, 1)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    rm = services.replica_manager
    manager = share_manager(services)
    key = request_member(request)
    if key is None:
        return _answer(rt, ErrorCode.invalid_request, "GroupId and MemberId must be set.")
    group_id, member_id = key
    ids: dict[TopicPartition, uuid.UUID] = {}
    unknown: list[tuple[uuid.UUID, int]] = []
    requested: list[TopicPartition] = []
    for topic in request.topics:
        name = rm.topic_name(topic.topic_id)
        for p in topic.partitions:
            if name is None:
                unknown.append((topic.topic_id, int(p.partition_index)))
                continue
            tp = TopicPartition(name, int(p.partition_index))
            ids[tp] = topic.topic_id
            requested.append(tp)
    acks = acknowledgements(rm, request.topics)
    forgotten = [TopicPartition(name, int(p)) for t in request.forgotten_topics_data
                 if (name := rm.topic_name(t.topic_id)) is not None for p in t.partitions]
    now_ms = services.clock.monotonic_ms()
    context = manager.sessions.fetch_context(key, int(request.share_session_epoch), requested, forgotten,
                                             bool(acks), now_ms)
    if isinstance(context, ErrorCode):
        return _answer(rt, context, top_level_error(context))
    for tp in context.partitions:
        if tp not in ids and (topic_id := rm.topic_id(tp.topic)) is not None:
            ids[tp] = topic_id
    denied = denied_topics(services, ctx, set(context.partitions) | set(acks))
    ack_errors = await acknowledge_all(manager, group_id, member_id, acks, denied, now_ms)
    results: dict[TopicPartition, Acquired | PartitionError] = {
        tp: PartitionError(ErrorCode.topic_authorization_failed) for tp in context.partitions if tp.topic in denied}
    if context.final:
        await manager.release(group_id, member_id, context.partitions)
        manager.sessions.remove(key)
    else:
        to_fetch = [tp for tp in context.partitions if tp.topic not in denied]
        if int(request.share_session_epoch) == 0:
            await manager.refresh(group_id, to_fetch)
        await manager.load(group_id, to_fetch)
        max_records, max_bytes = int(request.max_records), int(request.max_bytes)

        def acquire() -> bool:
            got = _acquire(manager, group_id, member_id, to_fetch, max_bytes, max_records,
                           services.clock.monotonic_ms())
            results.update(got)
            return any(isinstance(r, PartitionError) or r.acquired for r in got.values())

        max_wait_ms = int(request.max_wait.total_seconds() * 1000)
        if to_fetch and max_records > 0 and not acquire() and max_wait_ms > 0 and int(request.min_bytes) > 0:
            await purgatory_for(rm).wait(to_fetch, acquire, max_wait_ms, checked=True)
    return _response(services, rt, manager.lock_duration_ms(group_id), context.full, ids, results, ack_errors,
                     unknown)


def _acquire(manager: Any, group_id: str, member_id: str, partitions: list[TopicPartition], max_bytes: int,
             max_records: int, now_ms: int) -> dict[TopicPartition, Acquired | PartitionError]:
    out: dict[TopicPartition, Acquired | PartitionError] = {}
    remaining_bytes, remaining_records = max_bytes, max_records
    for tp in partitions:
        if remaining_records <= 0:
            break
        got = manager.acquire(group_id, member_id, tp, remaining_bytes, remaining_records, now_ms)
        out[tp] = got
        if isinstance(got, Acquired) and got.acquired:
            remaining_bytes = max(0, remaining_bytes - len(got.records))
            remaining_records -= sum(a.last_offset - a.first_offset + 1 for a in got.acquired)
    return out


def _response(services: BrokerServices, rt: type, lock_ms: int, full: bool, ids: dict[TopicPartition, uuid.UUID],
              results: dict[TopicPartition, Acquired | PartitionError], ack_errors: dict[TopicPartition, ErrorCode],
              unknown: list[tuple[uuid.UUID, int]]) -> Any:
    PartitionData = nested(rt, "PartitionData")
    AcquiredRecordsEntity = nested(rt, "AcquiredRecords")
    Topic = nested(rt, "ShareFetchableTopicResponse")
    topics: dict[uuid.UUID, list[Any]] = {}
    for tp in dict.fromkeys([*results, *ack_errors]):
        result = results.get(tp)
        ack_error = ack_errors.get(tp)
        error = result.code if isinstance(result, PartitionError) else ErrorCode.none
        acquired = result if isinstance(result, Acquired) else None
        if not full and ack_error is None and error == ErrorCode.none and not (acquired and acquired.acquired):
            continue  # an incremental answer leaves out the partitions with nothing to say
        current_leader = leader_fields(services, rt, tp, error)
        topics.setdefault(ids[tp], []).append(build(
            PartitionData, partition_index=tp.partition, error_code=error, error_message=None,
            acknowledge_error_code=ack_error if ack_error is not None else ErrorCode.none,
            acknowledge_error_message=None, current_leader=current_leader,
            records=acquired.records if acquired else b"",
            acquired_records=tuple(build(AcquiredRecordsEntity, first_offset=a.first_offset, last_offset=a.last_offset,
                                         delivery_count=a.delivery_count)
                                   for a in (acquired.acquired if acquired else ()))))
    for topic_id, index in unknown:
        current_leader = leader_fields(services, rt, None, ErrorCode.unknown_topic_id)
        topics.setdefault(topic_id, []).append(build(
            PartitionData, partition_index=index, error_code=ErrorCode.unknown_topic_id, error_message=None,
            acknowledge_error_code=ErrorCode.none, acknowledge_error_message=None, current_leader=current_leader,
            records=b"", acquired_records=()))
    return build(rt, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, error_message=None,
                 acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms),
                 responses=tuple(build(Topic, topic_id=t, partitions=tuple(ps)) for t, ps in topics.items()),
                 node_endpoints=())


def _answer(rt: type, error: ErrorCode, message: str | None) -> Any:
    return build(rt, throttle_time=datetime.timedelta(0), error_code=error, error_message=message,
                 acquisition_lock_timeout=datetime.timedelta(0), responses=(), node_endpoints=())
