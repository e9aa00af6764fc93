"""CreatePartitions (key 37, v0-3): translation to MetadataService.create_partitions.
A topic without ALTER is answered TOPIC_AUTHORIZATION_FAILED (Kafka's authorization)."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import ALTER, TOPIC
from kmirror.broker.quotas.mutation_admission import MESSAGE, THROTTLING_QUOTA_EXCEEDED, admit_mutations
from kmirror.broker.refusals import with_results
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.topics import MAX_PARTITIONS_PER_BATCH, CreatePartitionsTopic
from kmirror.protocol.entities import build, nested


@api(37, "CreatePartitions", 0, 3, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    alterable = services.authorization.filter(ctx, ALTER, TOPIC, (t.name for t in request.topics))
    refused = list(dict.fromkeys(t.name for t in request.topics if t.name not in alterable))
    if refused:
        request = dataclasses.replace(request, topics=tuple(t for t in request.topics if t.name in alterable))
    result_cls = nested(ctx.response_type, "CreatePartitionsTopicResult")
    return with_results(await _admitted(services, ctx, request), "results", (build(
        result_cls, name=name, error_code=ErrorCode.topic_authorization_failed, error_message="Authorization failed.")
        for name in refused))


async def _admitted(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    # KIP-599: strict from v3, permissive before; a topic is charged the partitions it adds
    image = services.metadata.image
    admission = admit_mutations(services, ctx, "CreatePartitions", [
        (t.name, max(0, int(t.count) - (len(image.topics[t.name].partitions) if t.name in image.topics else 0)))
        for t in request.topics], bool(request.validate_only), MAX_PARTITIONS_PER_BATCH)
    if admission.refused:
        request = dataclasses.replace(request, topics=tuple(t for t in request.topics if t.name not in admission.refused))
    if services.metadata.forwarding:  # a broker-only node: the controller answers
        response = await services.metadata.forward(request)
    else:
        response = await _create(services, ctx, request)
    result_cls = nested(ctx.response_type, "CreatePartitionsTopicResult")
    return admission.complete(response, "results", lambda name: build(
        result_cls, name=name, error_code=THROTTLING_QUOTA_EXCEEDED, error_message=MESSAGE))


async def _create(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    specs = [
        CreatePartitionsTopic(
            name=t.name,
            count=int(t.count),
            assignments=None if t.assignments is None else [[int(b) for b in a.broker_ids] for a in t.assignments],
        )
        for t in request.topics
    ]
    results = await services.controller_metadata.create_partitions(specs, validate_only=bool(request.validate_only))
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
