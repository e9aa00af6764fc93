"""DescribeConfigs (key 32, v1-4; kio has no v0): TOPIC, BROKER, BROKER_LOGGER (this node's
loggers, `kmirror.broker.loggers`), GROUP and MIRROR (KIP-1279) resources, with synonyms
(when asked), config source, read-only/sensitive flags, type (v3+) and documentation (v3+,
when asked).

KIP-1279: the topic config `mirror.name` (membership, with its `.removed` / `.paused`
suffixes) and the controller's internal `mirror.source.cluster.id` are never described.

A resource without DESCRIBE_CONFIGS is answered with its authorization error
(`config_authorization`; KIP-1279: DescribeConfigs on the ClusterMirror for a mirror)."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import DESCRIBE_CONFIGS
from kmirror.broker.config_authorization import config_refusal
from kmirror.broker.loggers import describe_loggers
from kmirror.broker.services import BrokerServices
from kmirror.metadata.image import ConfigResource, ConfigResourceType
from kmirror.protocol.entities import build, nested

HIDDEN_CONFIGS = frozenset({"mirror.name", "mirror.source.cluster.id"})


@api(32, "DescribeConfigs", 1, 4)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    result_cls = nested(rt, "DescribeConfigsResult")
    entry_cls = nested(rt, "DescribeConfigsResourceResult")
    synonym_cls = nested(rt, "DescribeConfigsSynonym")
    include_synonyms = bool(getattr(request, "include_synonyms", False))
    include_documentation = bool(getattr(request, "include_documentation", False))
    results = []
    for res in request.resources:
        resource = ConfigResource(int(res.resource_type), res.resource_name)
        refused = config_refusal(services, ctx, DESCRIBE_CONFIGS, resource.type, resource.name)
        if refused is not None:
            results.append(build(result_cls, error_code=refused, error_message="Authorization failed.",
                                 resource_type=i8(resource.type), resource_name=resource.name, configs=()))
            continue
        keys = None if res.configuration_keys is None else list(res.configuration_keys)
        described = (describe_loggers(services.logger_levels, services.node_id, resource, keys)
                     if resource.type == ConfigResourceType.BROKER_LOGGER
                     else services.metadata.describe_configs(resource, keys))
        entries = tuple(
            build(
                entry_cls,
                name=c.name,
                value=c.value,
                read_only=c.read_only,
                config_source=i8(int(c.source)),
                is_sensitive=c.is_sensitive,
                synonyms=tuple(
                    build(synonym_cls, name=s.name, value=s.value, source=i8(int(s.source))) for s in c.synonyms
                )
                if include_synonyms
                else (),
                config_type=i8(c.config_type),
                documentation=c.documentation if include_documentation else None,
            )
            for c in described.configs
            if c.name not in HIDDEN_CONFIGS
        )
        ok = described.error.code == ErrorCode.none
        results.append(
            build(
                result_cls,
                error_code=described.error.code,
                error_message=None if ok else described.error.message,
                resource_type=i8(resource.type),
                resource_name=resource.name,
                configs=entries,
            )
        )
    return build(rt, throttle_time=datetime.timedelta(0), results=tuple(results))
