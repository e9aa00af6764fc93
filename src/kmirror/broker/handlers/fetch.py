"""Fetch (key 1), v4-v17: consumer reads (Kafka `handleFetchRequest` / `fetchMessages`).

Records are the stored bytes, never re-encoded. Reads stop at the HW (read_uncommitted)
or the LSO (read_committed); `max_bytes` / `partition_max_bytes` follow KIP-74. When fewer
than `min_bytes` are readable the request waits in the purgatory for appends, up to
`max_wait_ms`.

Fetch sessions (KIP-227): this node hands out no session ids, as a Kafka broker with a
full session cache does: every answer carries session_id 0, so clients send full fetch
requests (librdkafka always does; the Java-style session handlers fall back to full
requests when the broker answers with session id 0). A request naming a session is
answered FETCH_SESSION_ID_NOT_FOUND.

Follower fetches (`replica_id` >= 0) are refused by the replica manager until in-cluster
replication lands; that is where they will be served.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.purgatory import purgatory_for, should_delay_fetch
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, has_field, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.outcomes import READ_COMMITTED, PartitionError, ReadOutcome
from kmirror.replication.replica_manager import FetchPartitionRequest
from kmirror.types import TopicPartition

INVALID_SESSION_ID = 0
# Session epochs (Kafka `FetchMetadata`): 0 opens a session, -1 is sessionless.
INITIAL_EPOCH = 0
FINAL_EPOCH = -1


@api(1, "Fetch", 4, 17)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    version = ctx.api_version
    session_error = _session_error(request)
    if session_error is not None:
        return build(rt, throttle_time=_zero(), error_code=session_error, session_id=INVALID_SESSION_ID, responses=())

    rm = services.replica_manager
    by_topic_id = version >= 13
    isolation_level = int(getattr(request, "isolation_level", 0))
    replica_id = _replica_id(request)
    # (topic key as sent, topic name or None, partition index) in request order
    order: list[tuple[Any, str | None, int]] = []
    reads: list[FetchPartitionRequest] = []
    for topic in request.topics:
        key = topic.topic_id if by_topic_id else topic.topic
        name = rm.topic_name(topic.topic_id) if by_topic_id else topic.topic
        for p in topic.partitions:
            order.append((key, name, int(p.partition)))
            if name is not None:
                reads.append(
                    FetchPartitionRequest(
                        TopicPartition(name, int(p.partition)),
                        int(p.fetch_offset),
                        int(p.partition_max_bytes),
                        int(getattr(p, "current_leader_epoch", -1)),
                    )
                )
    max_bytes = int(request.max_bytes)
    any_unknown_id = any(name is None for _, name, _ in order)

    def read() -> dict[TopicPartition, Any]:
        return rm.fetch(reads, max_bytes, isolation_level, replica_id)

    results = read()
    max_wait_ms = int(request.max_wait.total_seconds() * 1000)
    min_bytes = int(request.min_bytes)
    accumulated, errored = _progress(results)
    if should_delay_fetch(max_wait_ms, min_bytes, accumulated, errored or any_unknown_id):
        latest: list[dict[TopicPartition, Any]] = [results]

        def try_complete() -> bool:
            latest[0] = read()
            done_bytes, done_error = _progress(latest[0])
            return done_error or done_bytes >= min_bytes

        completed = await purgatory_for(rm).wait([r.topic_partition for r in reads], try_complete, max_wait_ms)
        results = latest[0] if completed else read()
    return _response(services, rt, order, results, by_topic_id, isolation_level)


def _session_error(request: Any) -> ErrorCode | None:
    session_id = int(getattr(request, "session_id", INVALID_SESSION_ID))
    epoch = int(getattr(request, "session_epoch", FINAL_EPOCH))
    if session_id != INVALID_SESSION_ID:
        # Closing a session we do not have is fine (Kafka answers it sessionless).
        return None if epoch == FINAL_EPOCH else ErrorCode.fetch_session_id_not_found
    if epoch not in (INITIAL_EPOCH, FINAL_EPOCH):
        return ErrorCode.invalid_fetch_session_epoch
    return None


def _replica_id(request: Any) -> int:
    """Who fetches: -1 for consumers; v15+ moved it into `replica_state` (KIP-903)."""
    if hasattr(request, "replica_state"):
        return int(request.replica_state.replica_id)
    return int(getattr(request, "replica_id", -1))


def _progress(results: dict[TopicPartition, Any]) -> tuple[int, bool]:
    total = 0
    errored = False
    for result in results.values():
        if isinstance(result, ReadOutcome):
            total += result.size
        else:
            errored = True
    return total, errored


def _response(
    services: BrokerServices,
    rt: type,
    order: list[tuple[Any, str | None, int]],
    results: dict[TopicPartition, Any],
    by_topic_id: bool,
    isolation_level: int,
) -> Any:
    PartitionData = nested(rt, "PartitionData")
    TopicResponse = nested(rt, "FetchableTopicResponse")
    aborted: tuple[Any, ...] | None = () if isolation_level == READ_COMMITTED else None
    topics: dict[Any, list[Any]] = {}
    for key, name, index in order:
        result = PartitionError(ErrorCode.unknown_topic_id) if name is None else results[TopicPartition(name, index)]
        if isinstance(result, ReadOutcome):
            data = build(
                PartitionData,
                partition_index=index,
                error_code=ErrorCode.none,
                high_watermark=result.high_watermark,
                last_stable_offset=result.last_stable_offset,
                log_start_offset=result.log_start_offset,
                aborted_transactions=aborted,
                preferred_read_replica=-1,
                records=result.records,
            )
        else:
            fields: dict[str, Any] = {}
            if name is not None and has_field(PartitionData, "current_leader") and result.code in _LEADER_HINT_ERRORS:
                fields["current_leader"] = _current_leader(services, rt, TopicPartition(name, index))
            data = build(
                PartitionData,
                partition_index=index,
                error_code=result.code,
                high_watermark=-1,
                last_stable_offset=-1,
                log_start_offset=-1,
                aborted_transactions=None,
                preferred_read_replica=-1,
                records=b"",
                **fields,
            )
        topics.setdefault(key, []).append(data)
    responses = tuple(
        build(
            TopicResponse,
            topic=key if not by_topic_id else "",
            topic_id=key if by_topic_id else uuid.UUID(int=0),
            partitions=tuple(parts),
        )
        for key, parts in topics.items()
    )
    return build(rt, throttle_time=_zero(), error_code=ErrorCode.none, session_id=INVALID_SESSION_ID, responses=responses)


_LEADER_HINT_ERRORS = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch})


def _current_leader(services: BrokerServices, rt: type, tp: TopicPartition) -> Any:
    """KIP-951: where the leader is now, so the client need not refresh metadata first."""
    leader_id, leader_epoch = services.replica_manager.current_leader(tp)
    return nested(rt, "LeaderIdAndEpoch")(leader_id=leader_id, leader_epoch=leader_epoch)


def _zero() -> datetime.timedelta:
    return datetime.timedelta(0)
