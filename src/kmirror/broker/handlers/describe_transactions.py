"""DescribeTransactions (key 65, v0; KIP-664): the state of transactional ids this broker
coordinates (others answer NOT_COORDINATOR, unknown ids TRANSACTIONAL_ID_NOT_FOUND), as
`kafka-transactions.sh describe` shows it."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import DESCRIBE, TOPIC, TRANSACTIONAL_ID
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


@api(65, "DescribeTransactions", 0, 0)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    State = nested(rt, "TransactionState")
    Topic = nested(rt, "TopicData")
    coordinator = services.transaction_coordinator
    states = []
    authorization = services.authorization
    for txn_id in request.transactional_ids:
        # Kafka: DESCRIBE on the transactional id (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
        # the topics of the transaction are those the principal may DESCRIBE
        refused = not authorization.authorize(ctx, DESCRIBE, TRANSACTIONAL_ID, txn_id)
        if coordinator is None or refused:
            error = ErrorCode.transactional_id_authorization_failed if refused else ErrorCode.coordinator_not_available
            states.append(build(State, error_code=error, transactional_id=txn_id,
                                transaction_state="", transaction_timeout=datetime.timedelta(0),
                                transaction_start_time=_instant(0), producer_id=-1, producer_epoch=-1, topics=()))
            continue
        d = coordinator.describe(txn_id)
        by_topic: dict[str, list[int]] = {}
        describable = authorization.filter(ctx, DESCRIBE, TOPIC, {tp.topic for tp in d.partitions})
        for tp in d.partitions:
            if tp.topic not in describable:
                continue
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        # -1 when no transaction is open, as Kafka sends it (an error entry carries the default 0)
        start = _instant(d.start_timestamp_ms if d.error == ErrorCode.none else 0)
        states.append(build(
            State, error_code=d.error, transactional_id=txn_id, transaction_state=d.state,
            transaction_timeout=datetime.timedelta(milliseconds=d.transaction_timeout_ms),
            transaction_start_time=start, producer_id=d.producer_id, producer_epoch=d.producer_epoch,
            topics=tuple(Topic(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items())))
    return build(rt, throttle_time=datetime.timedelta(0), transaction_states=tuple(states))


def _instant(ms: int) -> datetime.datetime:
    return datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(milliseconds=ms)
