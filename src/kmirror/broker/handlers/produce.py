"""Produce (key 0), v3-v13: append each partition's batch on its leader (Kafka `handleProduceRequest`).

v0-v2 carry legacy message formats and are not served (Kafka 4 serves v3+). acks=0 sends
no response. acks=all waits in the purgatory until the HW covers the batch, i.e. every ISR
member has it (Kafka `DelayedProduce`), or the request's timeout passes
(REQUEST_TIMED_OUT). If by then the ISR shrank below `min.insync.replicas` the answer is
NOT_ENOUGH_REPLICAS_AFTER_APPEND; if leadership moved, NOT_LEADER_OR_FOLLOWER.

Authorization (Kafka's): WRITE on the transactional id of a transactional request (else
every partition gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic (else its
partitions get TOPIC_AUTHORIZATION_FAILED and are not appended).
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import TOPIC, TRANSACTIONAL_ID, WRITE
from kmirror.broker.purgatory import delayed_produce_outcome, purgatory_for
from kmirror.broker.services import BrokerServices
from kmirror.broker.txn_verification import verify_transactional_batches
from kmirror.protocol.entities import build, has_field, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.outcomes import AppendOutcome, PartitionError
from kmirror.types import TopicPartition


@api(0, "Produce", 3, 13)
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rm = services.replica_manager
    by_topic_id = ctx.api_version >= 13
    entries: dict[TopicPartition, bytes | memoryview] = {}
    errors: dict[TopicPartition, PartitionError] = {}
    # (topic key as sent, topic name or None, partition index) in request order
    order: list[tuple[Any, str | None, int]] = []
    authorization = services.authorization
    transactional_id = getattr(request, "transactional_id", None)
    refused: ErrorCode | None = None
    if transactional_id is not None and not authorization.authorize(ctx, WRITE, TRANSACTIONAL_ID, transactional_id):
        refused = ErrorCode.transactional_id_authorization_failed
    names = [rm.topic_name(t.topic_id) if by_topic_id else t.name for t in request.topic_data]
    # one name per partition: the audit log's resourceRefCount is the topic's partitions (Kafka's)
    writable = authorization.filter(ctx, WRITE, TOPIC, (n for n, t in zip(names, request.topic_data, strict=True)
                                                        if n is not None for _ in t.partition_data))
    for topic in request.topic_data:
        key = topic.topic_id if by_topic_id else topic.name
        name = rm.topic_name(topic.topic_id) if by_topic_id else topic.name
        for p in topic.partition_data:
            order.append((key, name, int(p.index)))
            if name is None:
                continue
            tp = TopicPartition(name, int(p.index))
            if refused is not None or name not in writable:
                errors[tp] = PartitionError(refused or ErrorCode.topic_authorization_failed)
            elif p.records is None:
                errors[tp] = PartitionError(ErrorCode.invalid_record, "Produce request without a record batch")
            else:
                entries[tp] = p.records

    # KIP-890 part 1: a producer's first transactional batch on a partition must be in its
    # ongoing transaction (`kmirror.broker.txn_verification`); the append carries the guards
    guards = await verify_transactional_batches(services, transactional_id, entries, errors)
    results: dict[TopicPartition, Any] = dict(errors)
    results.update(rm.append_records(entries, int(request.acks), verification_guards=guards))

    if request.acks == 0:
        return None
    if request.acks == -1:
        await await_high_watermark(services.replica_manager, results, _timeout_ms(request.timeout))
    return _response(services, ctx, order, results, by_topic_id)


async def await_high_watermark(rm: Any, results: dict[TopicPartition, Any], timeout_ms: int) -> None:
    """DelayedProduce: every appended partition's HW must pass its last offset (`rm`: the
    ReplicaManager). Also used for transaction markers and transaction state writes."""
    required = {tp: r.last_offset + 1 for tp, r in results.items() if isinstance(r, AppendOutcome)}

    def check(tp: TopicPartition, offset: int) -> tuple[bool, ErrorCode]:
        partition = rm.get_partition(tp)
        if partition is None:
            return True, ErrorCode.not_leader_or_follower
        done: tuple[bool, ErrorCode] = partition.check_enough_replicas_reach_offset(offset)
        return done

    def complete() -> bool:
        return len(delayed_produce_outcome(required, check)) == len(required)

    if not complete():
        await purgatory_for(rm).wait(required, complete, timeout_ms)
    done = delayed_produce_outcome(required, check)
    for tp in required:
        error = done.get(tp, ErrorCode.request_timed_out)
        if error != ErrorCode.none:
            results[tp] = PartitionError(error)


def _response(
    services: BrokerServices,
    ctx: RequestContext,
    order: list[tuple[Any, str | None, int]],
    results: dict[TopicPartition, Any],
    by_topic_id: bool,
) -> Any:
    rt = ctx.response_type
    PartitionResponse = nested(rt, "PartitionProduceResponse")
    TopicResponse = nested(rt, "TopicProduceResponse")
    BatchError = nested(rt, "BatchIndexAndErrorMessage") if has_field(PartitionResponse, "record_errors") else None
    topics: dict[Any, list[Any]] = {}
    for key, name, index in order:
        if name is None:
            result: Any = PartitionError(ErrorCode.unknown_topic_id)
        else:
            result = results[TopicPartition(name, index)]
        topics.setdefault(key, []).append(_partition_response(services, rt, PartitionResponse, BatchError, name, index, result))
    responses = tuple(
        build(
            TopicResponse,
            name=key if not by_topic_id else "",
            topic_id=key if by_topic_id else uuid.UUID(int=0),
            partition_responses=tuple(parts),
        )
        for key, parts in topics.items()
    )
    return build(rt, responses=responses, throttle_time=datetime.timedelta(0))


def _partition_response(
    services: BrokerServices, rt: type, cls: type, batch_error_cls: Any, name: str | None, index: int, result: Any
) -> Any:
    if isinstance(result, AppendOutcome):
        return build(
            cls,
            index=index,
            error_code=ErrorCode.none,
            base_offset=result.base_offset,
            log_append_time=_datetime_or_none(result.log_append_time_ms),
            log_start_offset=result.log_start_offset,
            record_errors=(),
            error_message=None,
        )
    assert isinstance(result, PartitionError)
    fields: dict[str, Any] = {}
    if batch_error_cls is not None:
        fields["record_errors"] = tuple(
            batch_error_cls(batch_index=i, batch_index_error_message=m) for i, m in result.record_errors
        )
    if result.code == ErrorCode.not_leader_or_follower and name is not None and has_field(cls, "current_leader"):
        fields["current_leader"] = _current_leader(services, rt, TopicPartition(name, index))
    return build(
        cls,
        index=index,
        error_code=result.code,
        base_offset=-1,
        log_append_time=None,
        log_start_offset=-1,
        error_message=result.message,
        **fields,
    )


def _current_leader(services: BrokerServices, rt: type, tp: TopicPartition) -> Any:
    """KIP-951: where the leader is now, so the client need not refresh metadata first."""
    leader_id, leader_epoch = services.replica_manager.current_leader(tp)
    return nested(rt, "LeaderIdAndEpoch")(leader_id=leader_id, leader_epoch=leader_epoch)


def _datetime_or_none(ms: int) -> datetime.datetime | None:
    if ms < 0:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def _timeout_ms(timeout: Any) -> int:
    if isinstance(timeout, datetime.timedelta):
        return int(timeout.total_seconds() * 1000)
    return int(timeout)
