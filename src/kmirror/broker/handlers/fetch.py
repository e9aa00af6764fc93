"""Fetch (key 1), v4-v19: consumer reads (Kafka `handleFetchRequest` / `fetchMessages`).

Records are the stored bytes, never re-encoded. Reads stop at the HW (read_uncommitted)
or the LSO (read_committed); `max_bytes` / `partition_max_bytes` follow KIP-74; a consumer's `max_bytes` is capped by the
broker's `fetch.max.bytes` (Kafka's default 55 MB), which bounds every consumer Fetch answer. When fewer
than `min_bytes` are readable the request waits in the purgatory for appends, up to
`max_wait_ms`. A consumer with a `consumer_byte_rate` quota asks for no more than the quota
allows over its window, and a fetch past the quota is answered empty with its throttle time
(Kafka's `getThrottledResponse`; see `kmirror.broker.quotas.fetch_quota`).

Fetch sessions (KIP-227, v7+): `kmirror.replication.fetch_session` decides per request
whether it is sessionless, opens a session, or is incremental, and which partitions the
answer carries; the node keeps at most `max.incremental.fetch.session.cache.slots` sessions
(0: none, every fetch is answered sessionless). librdkafka and aiokafka fetch sessionless
(session 0, epoch -1); kafka-python and kmirror's mirror fetchers open sessions and send
incremental requests.

Follower fetches (`replica_id` >= 0, or `replica_state` in v15+) read up to the leader's
LEO and update the follower's state on the leader; `last_fetched_epoch` (v12+) may be
answered with `diverging_epoch`. Consumers sending client metadata (v11+, `rack_id`) may
fetch from a follower, and a leader with a rack-aware replica selector answers them with
`preferred_read_replica` (KIP-392).

v18 adds the follower's high watermark (KIP-1166, unused here). v19 is KIP-1279's: a
partition of a mirror topic answers `mirror_leader_epoch`, the latest epoch of the leader's
log, so a destination follower can bound the source epochs of the batches it appends;
ApiVersions advertises v19 only while `mirror.version` >= 1.

Authorization (Kafka's): a follower fetch needs CLUSTER_ACTION on the cluster, else every
partition is answered TOPIC_AUTHORIZATION_FAILED; a consumer fetch needs READ on each topic,
else that topic's partitions are answered TOPIC_AUTHORIZATION_FAILED and not read (every
time they are in the fetch, session or not).
"""

from __future__ import annotations

import datetime
import uuid
import weakref
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import CLUSTER_ACTION, READ, TOPIC
from kmirror.broker.purgatory import purgatory_for, should_delay_fetch
from kmirror.broker.quotas.fetch_quota import fetch_quota_for
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, has_field, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.protocol.fast_writer import Encoded, encode_item
from kmirror.protocol.mirror import fetch as fetch_v19
from kmirror.replication.fetch_session import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    ZERO_UUID,
    FetchContext,
    FetchSessionCache,
    SessionPartition,
)
from kmirror.replication.fetcher.truncation import leader_mirror_leader_epoch
from kmirror.replication.outcomes import READ_COMMITTED, IdleRead, PartitionError, ReadOutcome
from kmirror.replication.replica_manager import FetchPartitionRequest
from kmirror.types import TopicPartition

# (last fetched epoch, log start offset) of a consumer's partition (only followers send them)
_NOT_A_FOLLOWER = (-1, -1)
_LEADER_HINT_ERRORS = frozenset({ErrorCode.not_leader_or_follower, ErrorCode.fenced_leader_epoch})


@api(1, "Fetch", 4, 19, schemas=fetch_v19.schemas)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    version = ctx.api_version
    rm = services.replica_manager
    by_topic_id = version >= 13
    isolation_level = int(getattr(request, "isolation_level", 0))
    replica_id = _replica_id(request)
    requested: list[tuple[TopicPartition, SessionPartition]] = []
    follower_fields: dict[TopicPartition, tuple[int, int]] = {}
    unknown_ids: list[tuple[uuid.UUID, int]] = []
    for topic in request.topics:
        topic_id = topic.topic_id if by_topic_id else ZERO_UUID
        name = rm.topic_name(topic.topic_id) if by_topic_id else topic.topic
        for p in topic.partitions:
            if name is None:
                unknown_ids.append((topic.topic_id, int(p.partition)))
                continue
            tp = TopicPartition(name, int(p.partition))
            # (fetch offset, partition max bytes, current leader epoch, topic id)
            requested.append((tp, SessionPartition(int(p.fetch_offset), int(p.partition_max_bytes),
                                                   int(getattr(p, "current_leader_epoch", -1)), topic_id)))
            fetched = (int(getattr(p, "last_fetched_epoch", -1)), int(getattr(p, "log_start_offset", -1)))
            if fetched != _NOT_A_FOLLOWER:
                follower_fields[tp] = fetched

    session_id = int(getattr(request, "session_id", INVALID_SESSION_ID))
    session_epoch = int(getattr(request, "session_epoch", FINAL_EPOCH))
    context = fetch_session_cache(services).new_context(
        session_id, session_epoch, requested, _forgotten(rm, request, by_topic_id), services.clock.monotonic_ms()
    )
    if context.error is not None:
        return build(rt, throttle_time=_zero(), error_code=context.error, session_id=INVALID_SESSION_ID, responses=())

    max_bytes = int(request.max_bytes)
    if replica_id < 0:  # Kafka bounds consumer fetches by the broker's fetch.max.bytes
        max_bytes = min(max_bytes, int(services.config.get("fetch.max.bytes")))
    fetch_quota = fetch_quota_for(services, ctx, replica_id)
    if fetch_quota is not None:  # ... and by what consumer_byte_rate allows over the quota window
        max_bytes = fetch_quota.bound_max_bytes(max_bytes)
    replica_epoch = int(request.replica_state.replica_epoch) if hasattr(request, "replica_state") else -1
    # KIP-392: v11+ consumers send client metadata (rack_id, maybe empty); older ones read the leader only.
    client_rack = str(getattr(request, "rack_id", "") or "") if version >= 11 and replica_id < 0 else None
    refusals = _refusals(services, ctx, replica_id, context.partitions)

    def read() -> dict[TopicPartition, Any]:
        partitions = [(tp, s) for tp, s in context.partitions if tp not in refusals] if refusals else context.partitions
        idle_answers: dict[TopicPartition, IdleRead] = {}
        if replica_id < 0:
            # A consumer's partition with nothing to read is answered with its offsets, not
            # read (`IdleRead`). An incremental answer leaves out the partitions with nothing
            # to say: an idle partition whose offsets the session last told stays out of
            # `results`.
            # A session checks only what moved since its last check (`partitions_to_check`).
            idle = rm.idle_consumer_read
            incremental = context.incremental
            to_read = []
            for tp, s in context.partitions_to_check(rm.changes):
                if refusals and tp in refusals:
                    continue
                answer = idle(tp, s.fetch_offset, isolation_level, s.current_leader_epoch, client_rack)
                if answer is None:
                    to_read.append((tp, s))
                    context.settle(tp, False)
                elif answer != (s.high_watermark, s.last_stable_offset, s.log_start_offset):
                    idle_answers[tp] = answer
                    context.settle(tp, False)  # settled once the answer told these offsets
                else:
                    context.settle(tp, True)
                    if not incremental:
                        idle_answers[tp] = answer
            partitions = to_read
        reads = [FetchPartitionRequest(tp, s.fetch_offset, s.partition_max_bytes, s.current_leader_epoch,
                                       *follower_fields.get(tp, _NOT_A_FOLLOWER))
                 for tp, s in partitions]
        results: dict[TopicPartition, Any] = rm.fetch(
            reads, max_bytes, isolation_level, replica_id, client_rack=client_rack, replica_epoch=replica_epoch)
        results.update(idle_answers)
        if refusals:
            results.update(refusals)
        return results

    results = read()
    max_wait_ms = int(request.max_wait.total_seconds() * 1000)
    min_bytes = int(request.min_bytes)
    accumulated, errored = _progress(results)
    if should_delay_fetch(max_wait_ms, min_bytes, accumulated, errored or bool(unknown_ids)):
        latest: list[dict[TopicPartition, Any]] = [results]

        def try_complete() -> bool:
            latest[0] = read()
            done_bytes, done_error = _progress(latest[0])
            return done_error or done_bytes >= min_bytes

        completed = await purgatory_for(rm).wait([tp for tp, _ in context.partitions], try_complete, max_wait_ms,
                                                 checked=True)
        # Completed: read again now, as Kafka's `DelayedFetch.onComplete` does. The check ran
        # at the first append that made the fetch complete, in the middle of that Produce
        # request; by now the whole request is appended and the answer carries all of it,
        # not only its first partition. Expired: whatever changes a read (an append, a moved
        # high watermark) re-ran `try_complete`, so the last read is current: an idle fetch
        # of thousands of partitions reads them once, not twice. (Leadership and log start
        # moves are seen by the client's next fetch.)
        results = read() if completed else latest[0]
    if fetch_quota is not None:
        throttle_ms = fetch_quota.record(_progress(results)[0], services.clock.monotonic_ms())
        if throttle_ms > 0:  # Kafka answers a throttled fetch empty; the client waits out the throttle
            return build(rt, throttle_time=datetime.timedelta(milliseconds=throttle_ms), error_code=ErrorCode.none,
                         session_id=context.session_id, responses=())
    return _response(services, rt, context, results, unknown_ids, by_topic_id, isolation_level)


def _refusals(services: BrokerServices, ctx: RequestContext, replica_id: int,
              partitions: list[tuple[TopicPartition, SessionPartition]]) -> dict[TopicPartition, PartitionError]:
    """The partitions of the fetch the principal may not read (see the module docstring)."""
    authorization = services.authorization
    if authorization.unrestricted(ctx):
        return {}
    topics = {tp.topic for tp, _ in partitions}
    if replica_id >= 0:
        denied = set() if authorization.authorize_cluster(ctx, CLUSTER_ACTION) else topics
    else:
        # one name per partition: the audit log's resourceRefCount is the topic's partitions (Kafka's)
        denied = topics - authorization.filter(ctx, READ, TOPIC, (tp.topic for tp, _ in partitions))
    return {tp: PartitionError(ErrorCode.topic_authorization_failed) for tp, _ in partitions if tp.topic in denied}


_CACHES: weakref.WeakKeyDictionary[Any, FetchSessionCache] = weakref.WeakKeyDictionary()


def fetch_session_cache(services: BrokerServices) -> FetchSessionCache:
    """The node's fetch sessions (one cache per replica manager), at most
    `max.incremental.fetch.session.cache.slots` of them (Kafka's key and default, 1000)."""
    rm = services.replica_manager
    cache = _CACHES.get(rm)
    if cache is None:
        slots = int(services.config.get("max.incremental.fetch.session.cache.slots"))
        cache = _CACHES[rm] = FetchSessionCache(max_sessions=slots)
    return cache


def _forgotten(rm: Any, request: Any, by_topic_id: bool) -> list[TopicPartition]:
    out: list[TopicPartition] = []
    for topic in getattr(request, "forgotten_topics_data", ()):
        name = rm.topic_name(topic.topic_id) if by_topic_id else topic.topic
        if name is not None:
            out.extend(TopicPartition(name, int(p)) for p in topic.partitions)
    return out


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
            # Kafka answers at once with a diverging epoch or a preferred read replica.
            if result.diverging_epoch is not None or result.preferred_read_replica >= 0:
                errored = True
        elif not isinstance(result, IdleRead):
            errored = True
    return total, errored


def _aborted(entry_type: type, result: ReadOutcome, isolation_level: int) -> tuple[Any, ...] | None:
    """read_committed answers list the aborted transactions overlapping the returned
    batches (empty when none); read_uncommitted answers carry null, as Kafka's."""
    if isolation_level != READ_COMMITTED:
        return None
    return tuple(entry_type(producer_id=pid, first_offset=first) for pid, first in result.aborted_transactions)


def _response(
    services: BrokerServices,
    rt: type,
    context: FetchContext,
    results: dict[TopicPartition, Any],
    unknown_ids: list[tuple[uuid.UUID, int]],
    by_topic_id: bool,
    isolation_level: int,
) -> Any:
    PartitionData = nested(rt, "PartitionData")
    TopicResponse = nested(rt, "FetchableTopicResponse")
    topics: dict[Any, list[Any]] = {}
    with_records: list[TopicPartition] = []
    for tp, state in context.partitions:
        result = results.get(tp)
        if result is None:  # idle in an incremental session: not read, not answered
            continue
        key = state.topic_id if by_topic_id else tp.topic
        if isinstance(result, IdleRead):
            if context.should_answer(state, False, None, *result):
                topics.setdefault(key, []).append(_idle_data(services, rt, tp, result, isolation_level))
            continue
        if isinstance(result, ReadOutcome):
            if not context.should_answer(
                state, result.size > 0, None, result.high_watermark, result.last_stable_offset, result.log_start_offset
            ):
                continue
            if result.size > 0:
                with_records.append(tp)
            data = _read_data(rt, tp, result, isolation_level, _mirror_epoch(services, PartitionData, tp))
        else:
            context.should_answer(state, False, result.code, -1, -1, -1)
            data = _error_data(services, rt, PartitionData, tp.partition, result.code, tp)
        topics.setdefault(key, []).append(data)
    context.rotate(with_records)
    for topic_id, index in unknown_ids:
        topics.setdefault(topic_id, []).append(_error_data(services, rt, PartitionData, index, ErrorCode.unknown_topic_id))
    responses = tuple(
        build(
            TopicResponse,
            topic=key if not by_topic_id else "",
            topic_id=key if by_topic_id else ZERO_UUID,
            partitions=tuple(parts),
        )
        for key, parts in topics.items()
    )
    return build(rt, throttle_time=_zero(), error_code=ErrorCode.none, session_id=context.session_id, responses=responses)


def _mirror_epoch(services: BrokerServices, cls: type, tp: TopicPartition) -> int | None:
    """v19 (KIP-1279): the latest epoch of the leader's log; None before."""
    if has_field(cls, "mirror_leader_epoch"):
        return leader_mirror_leader_epoch(services.replica_manager, tp)
    return None


def _read_data(rt: type, tp: TopicPartition, result: ReadOutcome, isolation_level: int,
               mirror_epoch: int | None) -> Any:
    PartitionData = nested(rt, "PartitionData")
    fields: dict[str, Any] = {}
    if mirror_epoch is not None:
        fields["mirror_leader_epoch"] = mirror_epoch
    if result.diverging_epoch is not None and has_field(PartitionData, "diverging_epoch"):
        fields["diverging_epoch"] = nested(rt, "EpochEndOffset")(
            epoch=result.diverging_epoch.leader_epoch, end_offset=result.diverging_epoch.end_offset
        )
    return build(
        PartitionData,
        partition_index=tp.partition,
        error_code=ErrorCode.none,
        high_watermark=result.high_watermark,
        last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset,
        aborted_transactions=_aborted(nested(rt, "AbortedTransaction"), result, isolation_level),
        preferred_read_replica=result.preferred_read_replica,
        records=result.records,
        **fields,
    )


# (response type, partition, offsets, mirror leader epoch, isolation level) -> the answer's bytes
_IDLE_ANSWERS: dict[tuple[type, int, IdleRead, int | None, int], Encoded] = {}
MAX_IDLE_ANSWERS = 200_000


def _idle_data(services: BrokerServices, rt: type, tp: TopicPartition, idle: IdleRead, isolation_level: int) -> Encoded:
    """The answer of a partition with nothing to read (that of an empty read), encoded once:
    a consumer of a wide topic without a fetch session (librdkafka) asks for every
    partition in every request, and most of them answer the same as last time."""
    mirror_epoch = _mirror_epoch(services, nested(rt, "PartitionData"), tp)
    key = (rt, tp.partition, idle, mirror_epoch, isolation_level)
    encoded = _IDLE_ANSWERS.get(key)
    if encoded is None:
        if len(_IDLE_ANSWERS) >= MAX_IDLE_ANSWERS:
            _IDLE_ANSWERS.clear()
        empty = ReadOutcome(b"", idle.high_watermark, idle.last_stable_offset, idle.log_start_offset, -1)
        encoded = _IDLE_ANSWERS[key] = encode_item(_read_data(rt, tp, empty, isolation_level, mirror_epoch))
    return encoded


def _error_data(
    services: BrokerServices, rt: type, cls: type, index: int, code: ErrorCode, tp: TopicPartition | None = None
) -> Any:
    fields: dict[str, Any] = {}
    if tp is not None and has_field(cls, "current_leader") and code in _LEADER_HINT_ERRORS:
        leader_id, leader_epoch = services.replica_manager.current_leader(tp)
        # KIP-951: where the leader is now, so the client need not refresh metadata first.
        fields["current_leader"] = nested(rt, "LeaderIdAndEpoch")(leader_id=leader_id, leader_epoch=leader_epoch)
    return build(
        cls,
        partition_index=index,
        error_code=code,
        high_watermark=-1,
        last_stable_offset=-1,
        log_start_offset=-1,
        aborted_transactions=None,
        preferred_read_replica=-1,
        records=b"",
        **fields,
    )


def _zero() -> datetime.timedelta:
    return datetime.timedelta(0)
