"""Client quota configs (Kafka's `QuotaConfig`): entity types, quota keys, value checks, and the
broker keys of the quota windows.

A quota entity is a set of `(entity_type, entity_name)` pairs; a `None` name is the entity's
default (`--entity-default`). Allowed combinations, as Kafka's ClientQuotaControlManager:
`user`, `client-id`, `user`+`client-id` (keys PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE,
REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE) and `ip` alone (CONNECTION_CREATION_RATE).
Every refusal is INVALID_REQUEST with Kafka's message.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from typing import Final

from kmirror.config.definitions import LONG_MAX, ConfigDef, ConfigType, at_least

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"
ENTITY_TYPES: Final = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
REQUEST_PERCENTAGE: Final = "request_percentage"
CONTROLLER_MUTATION_RATE: Final = "controller_mutation_rate"
CONNECTION_CREATION_RATE: Final = "connection_creation_rate"

CLIENT_QUOTA_KEYS: Final[Mapping[str, ConfigType]] = {
    PRODUCER_BYTE_RATE: ConfigType.LONG,
    CONSUMER_BYTE_RATE: ConfigType.LONG,
    REQUEST_PERCENTAGE: ConfigType.DOUBLE,
    CONTROLLER_MUTATION_RATE: ConfigType.DOUBLE,
}
IP_QUOTA_KEYS: Final[Mapping[str, ConfigType]] = {CONNECTION_CREATION_RATE: ConfigType.INT}
QUOTA_CONFIG_DOCS: Final[Mapping[str, str]] = {
    PRODUCER_BYTE_RATE: "Bytes per second the entity may produce, per broker.",
    CONSUMER_BYTE_RATE: "Bytes per second the entity may fetch, per broker.",
    REQUEST_PERCENTAGE: "Percent of one request handler's time per second the entity may use, per broker.",
    CONTROLLER_MUTATION_RATE: "Partitions the entity may create or delete per second (KIP-599).",
    CONNECTION_CREATION_RATE: "Connections per second the address may open, per broker (KIP-612).",
}

ClientQuotaEntity = tuple[tuple[str, str | None], ...]
"""Sorted `(entity_type, entity_name)` pairs; a None name is the default entity."""


def entity_of(pairs: Iterable[tuple[str, str | None]]) -> ClientQuotaEntity:
    return tuple(sorted(pairs, key=lambda p: p[0]))


def validate_entity(pairs: Iterable[tuple[str, str | None]]) -> tuple[ClientQuotaEntity | None, str | None]:
    """`(entity, None)` or `(None, reason)` (Kafka's validateEntity + configKeysForEntityType)."""
    seen: dict[str, str | None] = {}
    for entity_type, name in pairs:
        if entity_type in seen:
            return None, f"Invalid empty client quota entity, duplicate entity entry {entity_type}"
        if entity_type not in ENTITY_TYPES:
            return None, f"Unhandled client quota entity type: {entity_type}"
        if name is not None and name == "":
            return None, f"Empty {entity_type} not supported"
        seen[entity_type] = name
    if not seen:
        return None, "Invalid empty client quota entity"
    if IP in seen:
        if len(seen) > 1:
            return None, "Invalid empty client quota entity"
        ip = seen[IP]
        if ip is not None and not _is_ip(ip):
            return None, f"{ip} is not a valid IP or resolvable host."
    return entity_of(seen.items()), None


def quota_keys(entity: ClientQuotaEntity) -> Mapping[str, ConfigType]:
    return IP_QUOTA_KEYS if entity and entity[0][0] == IP else CLIENT_QUOTA_KEYS


def validate_value(entity: ClientQuotaEntity, key: str, value: float) -> str | None:
    """None when `key` may take `value` for `entity`, else Kafka's reason."""
    kind = quota_keys(entity).get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if value != value or value in (float("inf"), float("-inf")):
        return f"Configuration {key} must be a finite number"
    if value < 0:
        # Kafka's QuotaConfig declares its rates with `atLeast(0)`-style semantics; a negative
        # rate cannot be enforced, so it is refused here rather than stored.
        return f"Configuration {key} must be a non-negative value"
    if kind in (ConfigType.LONG, ConfigType.INT):
        epsilon = 1e-6
        if abs(float(int(value + epsilon)) - value) > epsilon:
            return f"Configuration {key} must be a {'Long' if kind is ConfigType.LONG else 'Integer'} value"
    return None


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return text == "localhost"
    return True


def describe_entity(entity: ClientQuotaEntity) -> str:
    """kafka-configs.sh's label: `user-principal 'alice', client-id 'app'` / `the default client-id`."""
    names = {USER: "user-principal", CLIENT_ID: "client-id", IP: "ip"}
    parts = []
    for entity_type, name in sorted(entity, key=lambda p: ENTITY_TYPES.index(p[0])):
        parts.append(f"the default {names[entity_type]}" if name is None else f"{names[entity_type]} '{name}'")
    return ", ".join(parts)


# Broker keys of the sampled windows (Kafka's `quota.window.num` and friends).
QUOTA_BROKER_CONFIG_DEFS: Final = (
    ConfigDef("quota.window.num", ConfigType.INT, "11",
              "The number of samples to retain in memory for client quotas.", at_least(1)),
    ConfigDef("quota.window.size.seconds", ConfigType.INT, "1",
              "The time span of each sample for client quotas.", at_least(1)),
    ConfigDef("controller.quota.window.num", ConfigType.INT, "11",
              "The number of samples to retain in memory for controller mutation quotas.", at_least(1)),
    ConfigDef("controller.quota.window.size.seconds", ConfigType.INT, "1",
              "The time span of each sample for controller mutations quotas.", at_least(1)),
    ConfigDef("replication.quota.window.num", ConfigType.INT, "11",
              "The number of samples to retain in memory for replication (and mirror) quotas.", at_least(1)),
    ConfigDef("replication.quota.window.size.seconds", ConfigType.INT, "1",
              "The time span of each sample for replication (and mirror) quotas.", at_least(1)),
)

UNLIMITED_RATE: Final = float(LONG_MAX)
