"""DeleteTopics (key 20, v1-6; kio has no v0): by name (v1-5 `topic_names`, v6 `topics[].name`)
and by topic id (v6 `topics[].topic_id`). Authorization (Kafka's): DELETE on each topic,
else TOPIC_AUTHORIZATION_FAILED; a topic named by id without DESCRIBE is UNKNOWN_TOPIC_ID."""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import DELETE, DESCRIBE, TOPIC
from kmirror.broker.quotas.mutation_admission import MESSAGE, THROTTLING_QUOTA_EXCEEDED, admit_mutations
from kmirror.broker.refusals import with_results
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested

ZERO_UUID = uuid.UUID(int=0)


@api(20, "DeleteTopics", 1, 6, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    authorization = services.authorization
    if authorization.unrestricted(ctx):
        return await _admitted(services, ctx, request)
    image = services.metadata.image
    result_cls = nested(ctx.response_type, "DeletableTopicResult")
    kept, refused = [], []
    for t in _entries(ctx, request):
        name = _topic_name(image, ctx, t)
        if name is None or authorization.authorize(ctx, DELETE, TOPIC, name):
            kept.append(t)
        elif ctx.api_version >= 6 and t.topic_id not in (None, ZERO_UUID) and not authorization.authorize(
                ctx, DESCRIBE, TOPIC, name):
            refused.append(build(result_cls, name=None, topic_id=t.topic_id, error_code=ErrorCode.unknown_topic_id,
                                 error_message=None))
        else:
            refused.append(build(result_cls, name=name, topic_id=ZERO_UUID,
                                 error_code=ErrorCode.topic_authorization_failed, error_message="Authorization failed."))
    request = dataclasses.replace(request, **{"topics" if ctx.api_version >= 6 else "topic_names": tuple(kept)})
    return with_results(await _admitted(services, ctx, request), "responses", refused)


async def _admitted(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    # KIP-599: strict from v5, permissive before; a deletion is charged the topic's partitions
    image = services.metadata.image
    named = [name for name in dict.fromkeys(_topic_name(image, ctx, t) for t in _entries(ctx, request)) if name]
    admission = admit_mutations(services, ctx, "DeleteTopics", [
        (name, len(image.topics[name].partitions) if name in image.topics else 0) for name in named])
    if admission.refused:
        kept = tuple(t for t in _entries(ctx, request) if _topic_name(image, ctx, t) not in admission.refused)
        request = dataclasses.replace(request, **{"topics" if ctx.api_version >= 6 else "topic_names": kept})
    if services.metadata.forwarding:  # a broker-only node: the controller answers
        response = await services.metadata.forward(request)
    else:
        response = await _delete(services, ctx, request)
    result_cls = nested(ctx.response_type, "DeletableTopicResult")
    return admission.complete(response, "responses", lambda name: build(
        result_cls, name=name, topic_id=ZERO_UUID, error_code=THROTTLING_QUOTA_EXCEEDED, error_message=MESSAGE))


def _entries(ctx: RequestContext, request: Any) -> tuple[Any, ...]:
    return tuple(request.topics) if ctx.api_version >= 6 else tuple(request.topic_names)


def _topic_name(image: Any, ctx: RequestContext, entry: Any) -> str | None:
    """The name of a v1-5 name or a v6 `topics[]` entry (by id: looked up in the image)."""
    if ctx.api_version < 6:
        return str(entry)
    if entry.topic_id is not None and entry.topic_id != ZERO_UUID:
        topic = image.topics_by_id.get(entry.topic_id)
        return None if topic is None else str(topic.name)
    return None if entry.name is None else str(entry.name)


async def _delete(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
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
    results = await services.controller_metadata.delete_topics(names, ids)
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
