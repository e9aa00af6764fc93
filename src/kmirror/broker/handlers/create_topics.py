"""CreateTopics (key 19, v2-7; kio has no v0-1): translation to MetadataService.create_topics.

Kafka answers a name listed twice once, with INVALID_REQUEST. From v5 a successful topic
carries its partition count, replication factor and every config with its source.
A topic is created with CREATE on the cluster or on the topic, else it is answered
TOPIC_AUTHORIZATION_FAILED (Kafka's authorization); a created topic's configs are answered
only with DESCRIBE_CONFIGS on it, else none and TopicConfigErrorCode TOPIC_AUTHORIZATION_FAILED
(Kafka's ControllerApis).
"""

from __future__ import annotations

import dataclasses
import datetime
import uuid
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i16, i32

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import CREATE, DESCRIBE_CONFIGS, TOPIC
from kmirror.broker.quotas.mutation_admission import MESSAGE, THROTTLING_QUOTA_EXCEEDED, admit_mutations
from kmirror.broker.refusals import with_results
from kmirror.broker.services import BrokerServices
from kmirror.config.topic import TOPIC_CONFIG_DEFS, ConfigSource
from kmirror.kip1279.membership import HIDDEN_TOPIC_CONFIGS
from kmirror.metadata.config_description import topic_config_entry
from kmirror.metadata.controller.topics import MAX_PARTITIONS_PER_BATCH, CreatableTopic, CreateTopicResult
from kmirror.protocol.entities import build, has_field, nested


@api(19, "CreateTopics", 2, 7, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    authorization = services.authorization
    names = [t.name for t in request.topics]
    creatable = set(names) if authorization.authorize_cluster(ctx, CREATE, log_if_denied=False) else (
        authorization.filter(ctx, CREATE, TOPIC, names))
    refused = list(dict.fromkeys(n for n in names if n not in creatable))
    if refused:
        request = dataclasses.replace(request, topics=tuple(t for t in request.topics if t.name in creatable))
    result_cls = nested(ctx.response_type, "CreatableTopicResult")
    response = await _admitted(services, ctx, request)
    hidden = set(creatable) - authorization.filter(ctx, DESCRIBE_CONFIGS, TOPIC, creatable, log_if_denied=False)
    if hidden and has_field(result_cls, "configs"):
        response = dataclasses.replace(response, topics=tuple(
            dataclasses.replace(t, configs=(), topic_config_error_code=i16(ErrorCode.topic_authorization_failed))
            if t.name in hidden and t.error_code == ErrorCode.none else t for t in response.topics))
    return with_results(response, "topics", (build(
        result_cls, name=name, topic_id=uuid.UUID(int=0), error_code=ErrorCode.topic_authorization_failed,
        error_message="Authorization failed.", topic_config_error_code=i16(0), num_partitions=i32(-1),
        replication_factor=i16(-1), configs=None) for name in refused))


async def _admitted(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    # KIP-599: strict from v6, permissive before; topics over the quota are answered here
    admission = admit_mutations(services, ctx, "CreateTopics",
                                [(t.name, _permits(services, t)) for t in request.topics], bool(request.validate_only),
                                MAX_PARTITIONS_PER_BATCH)
    if admission.refused:
        request = dataclasses.replace(request, topics=tuple(t for t in request.topics if t.name not in admission.refused))
    if services.metadata.forwarding:  # a broker-only node: the controller answers
        response = await services.metadata.forward(request)
    else:
        response = await _create(services, ctx, request)
    result_cls = nested(ctx.response_type, "CreatableTopicResult")
    return admission.complete(response, "topics", lambda name: build(
        result_cls, name=name, topic_id=uuid.UUID(int=0), error_code=THROTTLING_QUOTA_EXCEEDED, error_message=MESSAGE,
        topic_config_error_code=i16(0), num_partitions=i32(-1), replication_factor=i16(-1), configs=None))


def _permits(services: BrokerServices, t: Any) -> int:
    """Partitions a topic would create (KIP-599 counts partitions)."""
    if t.assignments:
        return len(t.assignments)
    return int(t.num_partitions) if int(t.num_partitions) > 0 else services.config.num_partitions


async def _create(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    specs = [
        CreatableTopic(
            name=t.name,
            num_partitions=int(t.num_partitions),
            replication_factor=int(t.replication_factor),
            assignments={int(a.partition_index): [int(b) for b in a.broker_ids] for a in t.assignments},
            configs={c.name: c.value for c in t.configs},
        )
        for t in request.topics
    ]
    results = await services.metadata.create_topics(specs, validate_only=bool(request.validate_only))
    result_cls = nested(rt, "CreatableTopicResult")
    seen: set[str] = set()
    out = []
    for spec, result in zip(specs, results, strict=True):
        if result.name in seen:
            continue
        seen.add(result.name)
        out.append(_result(services, rt, result_cls, spec, result))
    return build(rt, throttle_time=datetime.timedelta(0), topics=tuple(out))


def _result(services: BrokerServices, rt: type, result_cls: type, spec: CreatableTopic, result: CreateTopicResult) -> Any:
    ok = result.error.code == ErrorCode.none
    configs: tuple[Any, ...] | None = None
    if ok and has_field(result_cls, "configs"):
        configs = _configs(services, rt, spec)
    return build(
        result_cls,
        name=result.name,
        topic_id=result.topic_id or uuid.UUID(int=0),
        error_code=result.error.code,
        error_message=result.error.message,
        topic_config_error_code=i16(0),
        num_partitions=i32(result.num_partitions if ok else -1),
        replication_factor=i16(result.replication_factor if ok else -1),
        configs=configs,
    )


def _configs(services: BrokerServices, rt: type, spec: CreatableTopic) -> tuple[Any, ...]:
    cls = nested(rt, "CreatableTopicConfigs")
    image = services.metadata.image
    out = []
    for name in (n for n in TOPIC_CONFIG_DEFS if n not in HIDDEN_TOPIC_CONFIGS):  # as DescribeConfigs
        requested = spec.configs.get(name)
        value: str | None
        if requested is not None:
            value, source, read_only, sensitive = requested, ConfigSource.DYNAMIC_TOPIC_CONFIG, False, False
        else:
            e = topic_config_entry(image, services.config, spec.name, name)
            value, source, read_only, sensitive = e.value, e.source, e.read_only, e.is_sensitive
        out.append(
            build(cls, name=name, value=value, read_only=read_only, config_source=i8(int(source)), is_sensitive=sensitive)
        )
    return tuple(out)
