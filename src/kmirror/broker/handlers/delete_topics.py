"""DeleteTopics (key 20, v1-6; kio has no v0): by name (v1-5 `topic_names`, v6 `topics[].name`)
and by topic id (v6 `topics[].topic_id`)."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested

ZERO_UUID = uuid.UUID(int=0)


@api(20, "DeleteTopics", 1, 6, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if services.metadata.forwarding:  # a broker-only node: the controller answers
        return await services.metadata.forward(request)
    rt = ctx.response_type
    names: list[str] = []
    ids: list[uuid.UUID] = []
    if ctx.api_version >= 6:
        for t in request.topics:
            if t.topic_id is not None and t.topic_id != ZERO_UUID:
                ids.append(t.topic_id)
            elif t.name is not None:
                names.append(t.name)
    else:
        names = list(request.topic_names)
    result_cls = nested(rt, "DeletableTopicResult")
    # Kafka answers a name (or id) listed twice once.
    names = list(dict.fromkeys(names))
    ids = list(dict.fromkeys(ids))
    results = await services.metadata.delete_topics(names, ids)
    out = tuple(
        build(
            result_cls,
            name=r.name,
            topic_id=r.topic_id or ZERO_UUID,
            error_code=r.error.code,
            error_message=r.error.message if r.error.code != ErrorCode.none else None,
        )
        for r in results
    )
    return build(rt, throttle_time=datetime.timedelta(0), responses=out)
