"""ListTransactions (key 66, v0-v2; KIP-664): the transactional ids this broker coordinates,
filtered by state names, producer ids, (v1, KIP-994) a minimum running time and (v2, KIP-1152)
a regular expression the ids must match whole (none when null or empty; RE2, as Kafka's
RE2/J; one that does not compile is INVALID_REGULAR_EXPRESSION). Unknown state names come back in
`unknown_state_filters`. Clients ask every broker and merge."""

from __future__ import annotations

import datetime
from typing import Any

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import DESCRIBE, TRANSACTIONAL_ID
from kmirror.broker.services import BrokerServices
from kmirror.protocol.client_regex import InvalidClientRegex, compile_client_regex
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


@api(66, "ListTransactions", 0, 2)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    coordinator = services.transaction_coordinator
    if coordinator is None:
        return build(rt, throttle_time=datetime.timedelta(0), error_code=ErrorCode.coordinator_not_available,
                     unknown_state_filters=(), transaction_states=())
    pattern = None
    if getattr(request, "transactional_id_pattern", None):
        try:
            pattern = compile_client_regex(request.transactional_id_pattern)
        except InvalidClientRegex:
            return build(rt, throttle_time=datetime.timedelta(0), error_code=ErrorCode.invalid_regular_expression,
                         unknown_state_filters=(), transaction_states=())
    listed, unknown = coordinator.list_transactions(
        list(request.state_filters), [int(p) for p in request.producer_id_filters],
        int(getattr(request, "duration_filter", -1)), pattern)
    # Kafka: only the transactional ids the principal may DESCRIBE
    describable = services.authorization.filter(ctx, DESCRIBE, TRANSACTIONAL_ID, (t.transactional_id for t in listed))
    listed = tuple(t for t in listed if t.transactional_id in describable)
    State = nested(rt, "TransactionState")
    return build(rt, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, unknown_state_filters=unknown,
                 transaction_states=tuple(State(transactional_id=t.transactional_id, producer_id=t.producer_id,
                                                transaction_state=t.state) for t in listed))
