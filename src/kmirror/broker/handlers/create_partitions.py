"""CreatePartitions (key 37, v0-3): translation to MetadataService.create_partitions."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.topics import CreatePartitionsTopic
from kmirror.protocol.entities import build, nested


@api(37, "CreatePartitions", 0, 3, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if services.metadata.forwarding:  # a broker-only node: the controller answers
        return await services.metadata.forward(request)
    rt = ctx.response_type
    specs = [
        CreatePartitionsTopic(
            name=t.name,
            count=int(t.count),
            assignments=None if t.assignments is None else [[int(b) for b in a.broker_ids] for a in t.assignments],
        )
        for t in request.topics
    ]
    results = await services.metadata.create_partitions(specs, validate_only=bool(request.validate_only))
    result_cls = nested(rt, "CreatePartitionsTopicResult")
    seen: set[str] = set()
    out = []
    for r in results:
        if r.name in seen:
            continue
        seen.add(r.name)
        out.append(
            build(
                result_cls,
                name=r.name,
                error_code=r.error.code,
                error_message=r.error.message if r.error.code != ErrorCode.none else None,
            )
        )
    return build(rt, throttle_time=datetime.timedelta(0), results=tuple(out))
