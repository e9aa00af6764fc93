"""Mirror configuration (KIP-1279 "Configuration"): per-mirror configs stored as metadata
ConfigRecords of resource type MIRROR, the mirror topic configs, and the broker configs.

Mirror configs: `bootstrap.servers` (required), `security.protocol`, `sasl.*`, `ssl.*`
(the source connection's client configs, Kafka client names; validated at CreateMirror /
IncrementalAlterConfigs, see kmirror.security.client_config), `mirror.topic.properties.exclude`,
`mirror.groups.include`, `mirror.acl.include`, and beyond the KIP `mirror.topics.include`
(source topics that join the mirror by themselves, MirrorMaker 2's `topics`). Any other key is refused (INVALID_CONFIG),
as Kafka refuses unknown topic configs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from kmirror.config.definitions import LONG_MAX, ConfigDef, ConfigType, at_least
from kmirror.security.client_config import PLAINTEXT, ClientSecurity, SecurityConfigError, client_security

MIRROR_NAME_CONFIG: Final = "mirror.name"
"""The topic config naming the mirror a topic belongs to (KIP-1279 topic configs)."""
BOOTSTRAP_SERVERS: Final = "bootstrap.servers"
SECURITY_PROTOCOL: Final = "security.protocol"
TOPIC_PROPERTIES_EXCLUDE: Final = "mirror.topic.properties.exclude"
GROUPS_INCLUDE: Final = "mirror.groups.include"
ACL_INCLUDE: Final = "mirror.acl.include"
TOPICS_INCLUDE: Final = "mirror.topics.include"
"""Comma-separated regexes (full match, as MirrorMaker 2's `topics`): source topics matching
one join the mirror at the next metadata refresh. Empty (the default): none do."""

SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SOURCE_CONNECTION_PREFIXES: Final = ("sasl.", "ssl.")

# KIP default of mirror.topic.properties.exclude. mirror.name is excluded whatever the value.
DEFAULT_TOPIC_PROPERTIES_EXCLUDE: Final = (
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "message.timestamp.difference.max.ms",
    "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms",
    "message.timestamp.type",
    "unclean.leader.election.enable",
    "min.insync.replicas",
    MIRROR_NAME_CONFIG,
)
ALWAYS_EXCLUDED_TOPIC_PROPERTIES: Final = frozenset({MIRROR_NAME_CONFIG})

# Mirror topic configs (destination-local, set on the destination topic).
SUPPORT_UNCLEAN_LEADER_ELECTION: Final = "mirror.support.unclean.leader.election"
REPLICATION_THROTTLED_REPLICAS: Final = "mirror.replication.throttled.replicas"
MIRROR_TOPIC_CONFIG_DEFS: Final = (
    ConfigDef(MIRROR_NAME_CONFIG, ConfigType.STRING, None,
              "The mirror that manages this topic (internal; hidden from DescribeConfigs)."),
    ConfigDef(SUPPORT_UNCLEAN_LEADER_ELECTION, ConfigType.BOOLEAN, "false",
              "When enabled, LME log truncation waits for all replicas (not just ISR members)."),
    ConfigDef(REPLICATION_THROTTLED_REPLICAS, ConfigType.LIST, "",
              "Replicas ([PartitionId]:[BrokerId] or *) whose mirror replication is throttled."),
)

# Broker configs, KIP defaults.
REQUEST_TIMEOUT_MS: Final = "request.timeout.ms"
MIRROR_BROKER_CONFIG_DEFS: Final = (
    ConfigDef("mirror.topic.num.partitions", ConfigType.INT, "50",
              "Number of partitions for the __mirror_state internal topic.", at_least(1)),
    ConfigDef("mirror.topic.replication.factor", ConfigType.SHORT, "3",
              "Replication factor for the __mirror_state internal topic (at most the live brokers when it is "
              "created).", at_least(1)),
    ConfigDef("mirror.topic.segment.bytes", ConfigType.INT, "104857600",
              "Segment size of the __mirror_state internal topic (as offsets.topic.segment.bytes): compaction "
              "cleans only rolled segments.", at_least(1)),
    ConfigDef("mirror.num.replica.fetchers", ConfigType.INT, "1",
              "Number of fetchers per mirror and source broker.", at_least(1)),
    ConfigDef("mirror.metadata.refresh.interval.ms", ConfigType.LONG, "30000",
              "Interval at which the coordinator refreshes metadata from source clusters.", at_least(1)),
    ConfigDef("mirror.replication.throttled.rate", ConfigType.LONG, str(LONG_MAX),
              "Upper bound (bytes/sec) on mirror replication traffic of throttled replicas.", at_least(0)),
    ConfigDef(REQUEST_TIMEOUT_MS, ConfigType.INT, "30000",
              "Maximum time in milliseconds the mirror's clients wait for a response of the source cluster.",
              at_least(0)),
)

MIRROR_STATE_TOPIC: Final = "__mirror_state"
STATE_TOPIC_CONFIGS: Final = {"cleanup.policy": "compact", "compression.type": "producer"}
"""`__mirror_state`'s topic configs, as Kafka's `__consumer_offsets`: compacted, batches kept as written."""


def state_topic_configs(broker_values: Mapping[str, str]) -> dict[str, str]:
    """`STATE_TOPIC_CONFIGS` and `segment.bytes` from the broker's `mirror.topic.segment.bytes`
    (as `__consumer_offsets` takes `offsets.topic.segment.bytes`), so the topic's records are
    compacted long before a default 1 GiB segment rolls."""
    return {**STATE_TOPIC_CONFIGS, "segment.bytes": str(broker_values.get("mirror.topic.segment.bytes", "104857600"))}


@dataclass(frozen=True, slots=True)
class MirrorBrokerConfig:
    mirror_topic_num_partitions: int = 50
    mirror_topic_replication_factor: int = 3
    mirror_num_replica_fetchers: int = 1
    mirror_metadata_refresh_interval_ms: int = 30000
    mirror_replication_throttled_rate: int = LONG_MAX
    mirror_topic_segment_bytes: int = 104857600
    request_timeout_ms: int = 30000

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> MirrorBrokerConfig:
        """Typed values of the mirror keys in `props`; raises ConfigError naming a bad key."""
        values = {d.name.replace(".", "_"): d.parse(props.get(d.name, d.default)) for d in MIRROR_BROKER_CONFIG_DEFS}
        return cls(**values)


@dataclass(frozen=True, slots=True)
class InvalidMirrorConfig:
    """Answered as INVALID_CONFIG at the edge."""

    message: str


@dataclass(frozen=True, slots=True)
class AclRule:
    """One `mirror.acl.include` rule: resourceType;resourceName;operation;permissionType;principal.
    `*` (or an omitted trailing field) matches anything; resource name and principal are
    regexes (full match), the other fields compare case-insensitively."""

    resource_type: str = "*"
    resource_name: str = "*"
    operation: str = "*"
    permission_type: str = "*"
    principal: str = "*"

    @classmethod
    def parse(cls, text: str) -> AclRule:
        fields = [f.strip() for f in text.split(";")]
        if len(fields) > 5 or any(not f for f in fields):
            raise ValueError(f"invalid ACL include rule {text!r}")
        for regex in fields[1:2] + fields[4:5]:
            if regex != "*":
                re.compile(regex)
        return cls(*fields)

    def matches(self, resource_type: str, resource_name: str, operation: str, permission_type: str,
                principal: str) -> bool:
        def exact(rule: str, value: str) -> bool:
            return rule == "*" or rule.upper() == value.upper()

        def regex(rule: str, value: str) -> bool:
            return rule == "*" or re.fullmatch(rule, value) is not None

        return (exact(self.resource_type, resource_type) and regex(self.resource_name, resource_name)
                and exact(self.operation, operation) and exact(self.permission_type, permission_type)
                and regex(self.principal, principal))


def _split_list(value: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in value.split(",") if item.strip())


@dataclass(frozen=True, slots=True)
class MirrorConfig:
    bootstrap_servers: tuple[str, ...]
    topic_properties_exclude: tuple[str, ...] = DEFAULT_TOPIC_PROPERTIES_EXCLUDE
    groups_include: tuple[str, ...] = (".*",)
    acl_include: tuple[AclRule, ...] = (AclRule(),)
    topics_include: tuple[str, ...] = ()
    source_connection: Mapping[str, str] = field(default_factory=dict)
    """`bootstrap.servers`, `security.protocol`, `sasl.*`, `ssl.*`: the source client's config."""
    source_security: ClientSecurity = PLAINTEXT
    """`source_connection`'s security, validated (an unusable value is INVALID_CONFIG)."""

    def is_topic_property_excluded(self, name: str) -> bool:
        """Never copied from the source: `mirror.name`, and every property matching one of
        `mirror.topic.properties.exclude` (each entry a full-match regex; a plain name
        matches itself)."""
        if name in ALWAYS_EXCLUDED_TOPIC_PROPERTIES:
            return True
        return any(re.fullmatch(pattern, name) for pattern in self.topic_properties_exclude)

    def topic_configs_to_copy(self, source_configs: Mapping[str, str]) -> dict[str, str]:
        """The source topic configs a mirror topic takes (creation and periodic sync)."""
        return {k: v for k, v in source_configs.items() if not self.is_topic_property_excluded(k)}

    def is_topic_included(self, topic: str) -> bool:
        """A source topic that joins the mirror by itself: it full-matches one of
        `mirror.topics.include` and is not internal (`__` names, as MirrorMaker 2's default
        `topics.exclude`)."""
        return not topic.startswith("__") and any(re.fullmatch(p, topic) for p in self.topics_include)

    def is_group_included(self, group_id: str) -> bool:
        return any(re.fullmatch(pattern, group_id) for pattern in self.groups_include)

    def is_acl_included(self, resource_type: str, resource_name: str, operation: str, permission_type: str,
                        principal: str) -> bool:
        return any(rule.matches(resource_type, resource_name, operation, permission_type, principal)
                   for rule in self.acl_include)


# The mirror's own configs (MIRROR resource), with the KIP's defaults.
MIRROR_CONFIG_DEFS: Final = (
    ConfigDef(BOOTSTRAP_SERVERS, ConfigType.LIST, None,
              "The source cluster's brokers, host:port (required).", read_only=False),
    ConfigDef(TOPIC_PROPERTIES_EXCLUDE, ConfigType.LIST, ",".join(DEFAULT_TOPIC_PROPERTIES_EXCLUDE),
              "Source topic configs a mirror topic does not take: full-match regexes, a plain name matching "
              "itself; mirror.name is never copied whatever the value.", read_only=False),
    ConfigDef(GROUPS_INCLUDE, ConfigType.LIST, ".*",
              "Consumer groups whose committed offsets are copied from the source: full-match regexes.",
              read_only=False),
    ConfigDef(ACL_INCLUDE, ConfigType.LIST, "*",
              "ACL bindings copied from the source: rules resourceType;resourceName;operation;permissionType;"
              "principal, * or an omitted trailing field matching anything, resource name and principal "
              "full-match regexes.", read_only=False),
    ConfigDef(TOPICS_INCLUDE, ConfigType.LIST, "",
              "kmirror: source topics that join the mirror by themselves at the next metadata refresh "
              "(full-match regexes, as MirrorMaker 2's topics; never internal __ topics); empty: none.",
              read_only=False),
)

# The source connection's client configs (Kafka client names) that kmirror.security.client_config
# reads; other sasl.* / ssl.* keys are stored and not read. Defaults are what an unset key means.
SOURCE_CONNECTION_CONFIG_DEFS: Final = (
    ConfigDef(SECURITY_PROTOCOL, ConfigType.STRING, "PLAINTEXT",
              "Protocol to the source: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.", read_only=False),
    ConfigDef("sasl.mechanism", ConfigType.STRING, "GSSAPI",
              "GSSAPI (Kerberos), OAUTHBEARER, PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.", read_only=False),
    ConfigDef("sasl.jaas.config", ConfigType.PASSWORD, None,
              "PlainLoginModule (PLAIN) or ScramLoginModule (SCRAM) with username and password; for GSSAPI "
              "Krb5LoginModule with useKeyTab=true, keyTab and principal, or useTicketCache=true; for OAUTHBEARER "
              "OAuthBearerLoginModule with clientId and clientSecret (and scope), or unsecuredLogin* options; "
              "required with SASL.", read_only=False, sensitive=True),
    ConfigDef("sasl.oauthbearer.token.endpoint.url", ConfigType.STRING, None,
              "OAUTHBEARER: the identity provider's token endpoint (OAuth client credentials grant).", read_only=False),
    ConfigDef("sasl.login.callback.handler.class", ConfigType.STRING, None,
              "Accepted (OAUTHBEARER's token endpoint decides the login).", read_only=False),
    ConfigDef("sasl.oauthbearer.client.credentials.client.id", ConfigType.STRING, None,
              "OAUTHBEARER: the client id (else the JAAS clientId).", read_only=False),
    ConfigDef("sasl.oauthbearer.client.credentials.client.secret", ConfigType.PASSWORD, None,
              "OAUTHBEARER: the client secret (else the JAAS clientSecret).", read_only=False, sensitive=True),
    ConfigDef("sasl.oauthbearer.scope", ConfigType.STRING, None,
              "OAUTHBEARER: the scope asked for (else the JAAS scope).", read_only=False),
    ConfigDef("sasl.kerberos.service.name", ConfigType.STRING, None,
              "GSSAPI: the first part of the source brokers' Kerberos principals (often kafka); required with GSSAPI.",
              read_only=False),
    ConfigDef("ssl.truststore.type", ConfigType.STRING, None, "PEM, the only format read.", read_only=False),
    ConfigDef("ssl.truststore.location", ConfigType.STRING, None,
              "PEM file of the CA certificates that verify the source's brokers (unset: the system CAs).",
              read_only=False),
    ConfigDef("ssl.truststore.certificates", ConfigType.PASSWORD, None, "Inline PEM CA certificates.",
              read_only=False, sensitive=True),
    ConfigDef("ssl.truststore.password", ConfigType.PASSWORD, None, "Accepted, ignored (PEM truststores).",
              read_only=False, sensitive=True),
    ConfigDef("ssl.ca.location", ConfigType.STRING, None,
              "librdkafka's name of ssl.truststore.location, read when that is unset.", read_only=False),
    ConfigDef("ssl.endpoint.identification.algorithm", ConfigType.STRING, "https",
              "https verifies the source brokers' host names; empty does not.", read_only=False),
    ConfigDef("ssl.keystore.type", ConfigType.STRING, None, "PEM, the only format read.", read_only=False),
    ConfigDef("ssl.keystore.location", ConfigType.STRING, None,
              "PEM file with the client's private key and certificate chain (a source with "
              "ssl.client.auth=required).", read_only=False),
    ConfigDef("ssl.keystore.certificate.chain", ConfigType.PASSWORD, None,
              "Inline PEM certificate chain, with ssl.keystore.key.", read_only=False, sensitive=True),
    ConfigDef("ssl.keystore.key", ConfigType.PASSWORD, None,
              "Inline PEM private key, with ssl.keystore.certificate.chain.", read_only=False, sensitive=True),
    ConfigDef("ssl.keystore.password", ConfigType.PASSWORD, None,
              "Accepted, ignored (ssl.key.password decrypts the key).", read_only=False, sensitive=True),
    ConfigDef("ssl.key.password", ConfigType.PASSWORD, None, "Password of an encrypted private key.",
              read_only=False, sensitive=True),
    ConfigDef("ssl.protocol", ConfigType.STRING, None, "Accepted, ignored.", read_only=False),
    ConfigDef("ssl.enabled.protocols", ConfigType.STRING, None, "Accepted, ignored.", read_only=False),
)

# Comma-separated lists: IncrementalAlterConfigs APPEND / SUBTRACT apply to these only.
MIRROR_LIST_CONFIGS: Final = frozenset(d.name for d in MIRROR_CONFIG_DEFS if d.type is ConfigType.LIST)

# The KIP's defaults of the mirror configs that have one (DescribeConfigs DEFAULT_CONFIG).
MIRROR_CONFIG_DEFAULTS: Final = {d.name: d.default for d in MIRROR_CONFIG_DEFS if d.default is not None}

# Source connection secrets (Kafka's PASSWORD type): described as null, never echoed.
SENSITIVE_MIRROR_CONFIGS: Final = frozenset({
    "sasl.jaas.config", "sasl.oauthbearer.client.credentials.client.secret", "ssl.key.password", "ssl.keystore.password", "ssl.truststore.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.certificates",
})


def is_sensitive_mirror_config(name: str) -> bool:
    return name in SENSITIVE_MIRROR_CONFIGS or name.endswith(".password")


def is_mirror_config_key(name: str) -> bool:
    return name in (BOOTSTRAP_SERVERS, SECURITY_PROTOCOL, TOPIC_PROPERTIES_EXCLUDE, GROUPS_INCLUDE,
                    ACL_INCLUDE, TOPICS_INCLUDE) or name.startswith(SOURCE_CONNECTION_PREFIXES)


def parse_mirror_config(configs: Mapping[str, str | None]) -> MirrorConfig | InvalidMirrorConfig:
    """Validate a mirror's configs (CreateMirror, IncrementalAlterConfigs on a MIRROR
    resource) and apply the KIP defaults. None values are treated as absent."""
    present = {k: v for k, v in configs.items() if v is not None}
    unknown = sorted(k for k in present if not is_mirror_config_key(k))
    if unknown:
        return InvalidMirrorConfig(f"Unknown mirror config(s): {', '.join(unknown)}")
    servers = _split_list(present.get(BOOTSTRAP_SERVERS, ""))
    if not servers:
        return InvalidMirrorConfig(f"Missing required mirror config {BOOTSTRAP_SERVERS}")
    for server in servers:
        host, sep, port = server.rpartition(":")
        if not sep or not port.isdigit() or not 0 < int(port) < 65536:
            return InvalidMirrorConfig(f"Invalid url in {BOOTSTRAP_SERVERS}: {server}")
    protocol = present.get(SECURITY_PROTOCOL)
    if protocol is not None and protocol.upper() not in SECURITY_PROTOCOLS:
        return InvalidMirrorConfig(f"Invalid value {protocol} for {SECURITY_PROTOCOL}: expected one of "
                                   f"{', '.join(SECURITY_PROTOCOLS)}")
    exclude = (_split_list(present[TOPIC_PROPERTIES_EXCLUDE]) if TOPIC_PROPERTIES_EXCLUDE in present
               else DEFAULT_TOPIC_PROPERTIES_EXCLUDE)
    groups = _split_list(present[GROUPS_INCLUDE]) if GROUPS_INCLUDE in present else (".*",)
    topics = _split_list(present.get(TOPICS_INCLUDE, ""))
    for key, patterns in ((TOPIC_PROPERTIES_EXCLUDE, exclude), (GROUPS_INCLUDE, groups), (TOPICS_INCLUDE, topics)):
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as e:
                return InvalidMirrorConfig(f"Invalid regex {pattern!r} in {key}: {e}")
    try:
        acls = tuple(AclRule.parse(r) for r in _split_list(present.get(ACL_INCLUDE, "*")))
    except (ValueError, re.error) as e:
        return InvalidMirrorConfig(f"Invalid value for {ACL_INCLUDE}: {e}")
    connection = {k: v for k, v in present.items()
                  if k in (BOOTSTRAP_SERVERS, SECURITY_PROTOCOL) or k.startswith(SOURCE_CONNECTION_PREFIXES)}
    try:
        security = client_security(connection)
    except SecurityConfigError as e:
        return InvalidMirrorConfig(f"Invalid source connection config: {e}")
    return MirrorConfig(servers, exclude, groups, acls, topics, connection, security)
