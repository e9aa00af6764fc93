"""What DescribeConfigs reports: each config's value, source and synonyms, resolved with
Kafka's precedence.

Topic key:  DYNAMIC_TOPIC_CONFIG > DYNAMIC_BROKER_CONFIG (this node) >
            DYNAMIC_DEFAULT_BROKER_CONFIG ("" resource) > STATIC_BROKER_CONFIG > DEFAULT_CONFIG,
            the broker levels looked up through the topic key's broker synonyms in order.
Broker key: the same chain without the topic level.
Mirror key (KIP-1279 MIRROR resource): `describe_mirror_configs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kmirror.config.broker_keys import BROKER_CONFIG_DEFS
from kmirror.config.definitions import DESCRIBE_TYPE_CODES, ConfigDef, ConfigType
from kmirror.config.group import GROUP_CONFIG_DEFS
from kmirror.config.mirror import (
    MIRROR_CONFIG_DEFAULTS,
    MIRROR_LIST_CONFIGS,
    is_mirror_config_key,
    is_sensitive_mirror_config,
)
from kmirror.config.server import ServerConfig
from kmirror.config.topic import TOPIC_CONFIG_DEFS, ConfigSource
from kmirror.metadata.controller.configs import DYNAMIC_BROKER_KEYS
from kmirror.metadata.controller.mirror_configs import check_mirror_resource
from kmirror.metadata.controller.result import NONE, ApiError
from kmirror.metadata.controller.topics import validate_topic_name
from kmirror.metadata.image import ConfigResource, ConfigResourceType, MetadataImage
from kmirror.metadata.mirror_records import MIRROR_CONFIG_RESOURCE_TYPE

_UNIT_MS = {".minutes": 60_000, ".hours": 3_600_000}


@dataclass(frozen=True, slots=True)
class ConfigSynonym:
    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class DescribedConfig:
    name: str
    value: str | None
    source: ConfigSource
    read_only: bool
    is_sensitive: bool
    config_type: int
    documentation: str | None
    synonyms: tuple[ConfigSynonym, ...]


@dataclass(frozen=True, slots=True)
class DescribeConfigsResult:
    resource: ConfigResource
    error: ApiError
    configs: tuple[DescribedConfig, ...]


def _as_topic_value(topic_key: str, broker_key: str, value: str) -> str:
    """A broker synonym's value in the topic key's unit (log.retention.hours=1 -> 3600000)."""
    for suffix, factor in _UNIT_MS.items():
        if broker_key.endswith(suffix) and topic_key.endswith(".ms"):
            try:
                return str(int(value) * factor)
            except ValueError:
                return value
    return value


def _broker_chain(image: MetadataImage, server: ServerConfig, keys: Sequence[str]) -> list[ConfigSynonym]:
    node = image.configs.get(ConfigResource(ConfigResourceType.BROKER, str(server.node_id)), {})
    cluster = image.configs.get(ConfigResource(ConfigResourceType.BROKER, ""), {})
    chain: list[ConfigSynonym] = []
    for level, source in (
        (node, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (cluster, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
    ):
        chain += [ConfigSynonym(k, level[k], source) for k in keys if k in level]
    chain += [
        ConfigSynonym(k, server.raw[k].strip(), ConfigSource.STATIC_BROKER_CONFIG)
        for k in keys
        if k in server.raw
    ]
    return chain


def topic_config_entry(image: MetadataImage, server: ServerConfig, topic: str, name: str) -> DescribedConfig:
    d = TOPIC_CONFIG_DEFS[name]
    chain: list[ConfigSynonym] = []
    dynamic = image.topic_config(topic)
    if name in dynamic:
        chain.append(ConfigSynonym(name, dynamic[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
    chain += _broker_chain(image, server, d.synonyms)
    if d.synonyms:
        # Kafka's default, named after the first synonym that has one (log.retention.hours=168).
        named = next((k for k in d.synonyms if BROKER_CONFIG_DEFS[k].default is not None), None)
        if named is None:
            chain.append(ConfigSynonym(d.synonyms[0], d.definition.default, ConfigSource.DEFAULT_CONFIG))
        else:
            chain.append(ConfigSynonym(named, BROKER_CONFIG_DEFS[named].default, ConfigSource.DEFAULT_CONFIG))
    else:
        chain.append(ConfigSynonym(name, d.definition.default, ConfigSource.DEFAULT_CONFIG))
    top = chain[0]
    value = top.value
    if top.source != ConfigSource.DYNAMIC_TOPIC_CONFIG and value is not None:
        if top.source == ConfigSource.STATIC_BROKER_CONFIG and d.from_broker is not None:
            value = d.from_broker(server)  # static precedence among synonyms (e.g. retention)
        else:
            value = _as_topic_value(name, top.name, value)
    return _described(d.definition, value, top.source, chain)


def _broker_def(name: str) -> ConfigDef:
    """A broker key's definition; a stored name kmirror does not define reads as a string."""
    return BROKER_CONFIG_DEFS.get(name) or ConfigDef(name, ConfigType.STRING, None, STORED_ONLY_DOC, read_only=False)


STORED_ONLY_DOC = "Stored and described; kmirror does not act on it."


def broker_config_entry(image: MetadataImage, server: ServerConfig, name: str) -> DescribedConfig:
    d = _broker_def(name)
    chain = _broker_chain(image, server, [name])
    chain.append(ConfigSynonym(name, d.default, ConfigSource.DEFAULT_CONFIG))
    top = chain[0]
    entry = _described(d, top.value, top.source, chain)
    return DescribedConfig(
        entry.name,
        entry.value,
        entry.source,
        name not in DYNAMIC_BROKER_KEYS and name in BROKER_CONFIG_DEFS,
        entry.is_sensitive,
        entry.config_type,
        entry.documentation,
        entry.synonyms,
    )


def _described(
    d: ConfigDef, value: str | None, source: ConfigSource, chain: list[ConfigSynonym]
) -> DescribedConfig:
    return DescribedConfig(
        name=d.name,
        value=None if d.sensitive else value,
        source=source,
        read_only=d.read_only,
        is_sensitive=d.sensitive,
        config_type=DESCRIBE_TYPE_CODES.get(d.type, 0),
        documentation=d.doc or None,
        synonyms=tuple(chain),
    )


def describe_configs(
    image: MetadataImage, server: ServerConfig, resource: ConfigResource, keys: Sequence[str] | None
) -> DescribeConfigsResult:
    """`keys` None means every key; unknown keys are left out, like Kafka."""
    if resource.type == ConfigResourceType.TOPIC:
        err = validate_topic_name(resource.name)
        if err is not None:
            return DescribeConfigsResult(resource, err, ())
        if resource.name not in image.topics:
            return DescribeConfigsResult(
                resource,
                ApiError(ErrorCode.unknown_topic_or_partition, f"Topic {resource.name} does not exist."),
                (),
            )
        names = [n for n in (keys if keys is not None else TOPIC_CONFIG_DEFS) if n in TOPIC_CONFIG_DEFS]
        entries = tuple(topic_config_entry(image, server, resource.name, n) for n in names)
        return DescribeConfigsResult(resource, NONE, entries)
    if resource.type == ConfigResourceType.BROKER:
        if resource.name == "":
            cluster = image.configs.get(resource, {})
            names = [n for n in (keys if keys is not None else sorted(cluster)) if n in cluster]
            entries = tuple(
                _described(
                    _broker_def(n),
                    cluster[n],
                    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                    [ConfigSynonym(n, cluster[n], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)],
                )
                for n in names
            )
            return DescribeConfigsResult(resource, NONE, entries)
        if resource.name != str(server.node_id):
            return DescribeConfigsResult(
                resource,
                ApiError(
                    ErrorCode.invalid_request,
                    f"Unexpected broker id, expected {server.node_id} or empty string, but received {resource.name}",
                ),
                (),
            )
        node = image.configs.get(resource, {})
        stored_only = {n for n in (*node, *image.configs.get(ConfigResource(ConfigResourceType.BROKER, ""), {}))
                       if n not in BROKER_CONFIG_DEFS}
        known = sorted({*BROKER_CONFIG_DEFS, *stored_only})
        names = [n for n in (keys if keys is not None else known) if n in BROKER_CONFIG_DEFS or n in stored_only]
        return DescribeConfigsResult(
            resource, NONE, tuple(broker_config_entry(image, server, n) for n in names)
        )
    if resource.type == MIRROR_CONFIG_RESOURCE_TYPE:
        return describe_mirror_configs(image, resource, keys)
    if resource.type == ConfigResourceType.GROUP:
        return describe_group_configs(image, resource, keys)
    return DescribeConfigsResult(
        resource, ApiError(ErrorCode.invalid_request, f"Unsupported resource type {resource.type}."), ()
    )


def describe_group_configs(
    image: MetadataImage, resource: ConfigResource, keys: Sequence[str] | None
) -> DescribeConfigsResult:
    """A GROUP resource (Kafka's ConfigHelper): every group key, GROUP_CONFIG when set for the
    group, else its default (DEFAULT_CONFIG); the group need not exist."""
    if not resource.name:
        return DescribeConfigsResult(resource, ApiError(ErrorCode.invalid_request, "Group name must not be empty."), ())
    stored = image.configs.get(resource, {})
    entries = []
    for name in sorted(GROUP_CONFIG_DEFS) if keys is None else [k for k in keys if k in GROUP_CONFIG_DEFS]:
        d = GROUP_CONFIG_DEFS[name]
        value, source = (stored[name], ConfigSource.GROUP_CONFIG) if name in stored else (d.default, ConfigSource.DEFAULT_CONFIG)
        entries.append(_described(d, value, source, [ConfigSynonym(name, value, source)]))
    return DescribeConfigsResult(resource, NONE, tuple(entries))


def describe_mirror_configs(
    image: MetadataImage, resource: ConfigResource, keys: Sequence[str] | None
) -> DescribeConfigsResult:
    """KIP-1279 MIRROR resource: the configs set by CreateMirror / IncrementalAlterConfigs
    (source UNKNOWN: the KIP names no ConfigSource for mirrors, and a new number would break
    clients that map sources to an enum), then the KIP defaults of unset keys
    (DEFAULT_CONFIG). Internal keys are never described; secrets are null and sensitive."""
    err = check_mirror_resource(image, resource.name)
    if err is not None:
        return DescribeConfigsResult(resource, err, ())
    stored = {k: v for k, v in image.configs[resource].items() if is_mirror_config_key(k)}
    values = {k: (v, ConfigSource.UNKNOWN) for k, v in stored.items()}
    values |= {k: (v, ConfigSource.DEFAULT_CONFIG) for k, v in MIRROR_CONFIG_DEFAULTS.items() if k not in stored}
    entries = []
    for name in sorted(values) if keys is None else [k for k in keys if k in values]:
        value, source = values[name]
        sensitive = is_sensitive_mirror_config(name)
        shown = None if sensitive else value
        kind = ConfigType.PASSWORD if sensitive else ConfigType.LIST if name in MIRROR_LIST_CONFIGS else ConfigType.STRING
        entries.append(DescribedConfig(name, shown, source, False, sensitive, DESCRIBE_TYPE_CODES[kind], None,
                                       (ConfigSynonym(name, shown, source),)))
    return DescribeConfigsResult(resource, NONE, tuple(entries))


def effective_topic_config(image: MetadataImage, topic: str, server: ServerConfig) -> dict[str, str]:
    """Every topic key with a value, as the topic runs with it (all precedence levels)."""
    out: dict[str, str] = {}
    for name in TOPIC_CONFIG_DEFS:
        value = topic_config_entry(image, server, topic, name).value
        if value is not None:
            out[name] = value
    return out
