"""Every broker key kmirror accepts in `server.properties`, with Kafka's names and defaults.

Keys marked "accepted, ignored" keep stock Kafka `server.properties` files loadable; they have
no effect here (threads, socket buffers, share coordinator, transaction log sizing).
"""

from __future__ import annotations

from kmirror.config.definitions import (
    LONG_MAX,
    ConfigDef,
    ConfigType,
    at_least,
    between,
    each_of,
    one_of,
)

INT, L, B, S, LI, D = (
    ConfigType.INT,
    ConfigType.LONG,
    ConfigType.BOOLEAN,
    ConfigType.STRING,
    ConfigType.LIST,
    ConfigType.DOUBLE,
)

CLEANUP_POLICIES = ("delete", "compact")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

_DEFS: tuple[ConfigDef, ...] = (
    ConfigDef("node.id", INT, None, "The node id of this server.", at_least(0)),
    ConfigDef("process.roles", LI, "broker,controller", "Roles of this node (kmirror default: combined).",
              each_of("broker", "controller")),
    ConfigDef("listeners", LI, "PLAINTEXT://:9092", "Listener URIs NAME://host:port."),
    ConfigDef("advertised.listeners", LI, None, "Listeners published to clients (default: listeners)."),
    ConfigDef("listener.security.protocol.map", LI,
              "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
              "Listener name to security protocol."),
    ConfigDef("controller.listener.names", LI, None, "Listener names used by the controller."),
    ConfigDef("controller.quorum.voters", LI, "", "Static voters id@host:port."),
    ConfigDef("controller.quorum.bootstrap.servers", LI, "", "Controller endpoints host:port."),
    ConfigDef("inter.broker.listener.name", S, None, "Listener used between brokers."),
    ConfigDef("log.dirs", LI, None, "Log directories (default: log.dir)."),
    ConfigDef("log.dir", S, "/tmp/kafka-logs", "Log directory when log.dirs is absent."),
    ConfigDef("num.partitions", INT, "1", "Default partition count of new topics.", at_least(1)),
    ConfigDef("default.replication.factor", INT, "1", "Default replication factor of new topics.", at_least(1)),
    ConfigDef("auto.create.topics.enable", B, "true", "Create topics on Metadata requests.", read_only=True),
    ConfigDef("delete.topic.enable", B, "true", "Allow topic deletion."),
    ConfigDef("message.max.bytes", INT, "1048588", "Largest record batch size.", at_least(0), read_only=False),
    ConfigDef("log.segment.bytes", INT, "1073741824", "Segment size.", at_least(14)),
    ConfigDef("log.roll.ms", L, None, "Segment roll time (overrides log.roll.hours).", at_least(1)),
    ConfigDef("log.roll.hours", INT, "168", "Segment roll time in hours.", at_least(1)),
    ConfigDef("log.roll.jitter.ms", L, None, "Segment roll jitter.", at_least(0)),
    ConfigDef("log.roll.jitter.hours", INT, "0", "Segment roll jitter in hours.", at_least(0)),
    ConfigDef("log.retention.ms", L, None, "Retention time (-1 unlimited; overrides minutes/hours)."),
    ConfigDef("log.retention.minutes", INT, None, "Retention time in minutes."),
    ConfigDef("log.retention.hours", INT, "168", "Retention time in hours."),
    ConfigDef("log.retention.bytes", L, "-1", "Retention size per partition (-1 unlimited)."),
    ConfigDef("log.retention.check.interval.ms", L, "300000", "Retention check period.", at_least(1)),
    ConfigDef("log.flush.interval.messages", L, str(LONG_MAX), "Flush after this many messages.", at_least(1)),
    ConfigDef("log.flush.interval.ms", L, None, "Flush after this time."),
    ConfigDef("log.flush.scheduler.interval.ms", L, str(LONG_MAX), "Flush check period."),
    ConfigDef("log.index.interval.bytes", INT, "4096", "Bytes between offset index entries.", at_least(0)),
    ConfigDef("log.index.size.max.bytes", INT, "10485760", "Maximum index file size.", at_least(4)),
    ConfigDef("log.segment.delete.delay.ms", L, "60000", "Delay before deleting a segment file.", at_least(0)),
    ConfigDef("log.cleanup.policy", LI, "delete", "Default cleanup policy.", each_of(*CLEANUP_POLICIES)),
    ConfigDef("log.cleaner.delete.retention.ms", L, "86400000", "Tombstone retention.", at_least(0)),
    ConfigDef("log.cleaner.min.compaction.lag.ms", L, "0", "Minimum compaction lag.", at_least(0)),
    ConfigDef("log.cleaner.max.compaction.lag.ms", L, str(LONG_MAX), "Maximum compaction lag.", at_least(1)),
    ConfigDef("log.cleaner.min.cleanable.ratio", D, "0.5", "Minimum dirty ratio.", between(0, 1)),
    ConfigDef("log.cleaner.enable", B, "true", "Accepted, ignored."),
    ConfigDef("log.preallocate", B, "false", "Preallocate segment files."),
    ConfigDef("log.message.timestamp.type", S, "CreateTime", "Timestamp type.", one_of(*TIMESTAMP_TYPES)),
    ConfigDef("log.message.timestamp.before.max.ms", L, str(LONG_MAX), "Max timestamp lag behind.", at_least(0)),
    ConfigDef("log.message.timestamp.after.max.ms", L, "3600000", "Max timestamp lead ahead.", at_least(0)),
    ConfigDef("log.local.retention.ms", L, "-2", "Local retention time (tiered storage).", at_least(-2)),
    ConfigDef("log.local.retention.bytes", L, "-2", "Local retention size (tiered storage).", at_least(-2)),
    ConfigDef("compression.type", S, "producer", "Broker compression type.", one_of(*COMPRESSION_TYPES)),
    ConfigDef("min.insync.replicas", INT, "1", "Minimum ISR size for acks=all.", at_least(1)),
    ConfigDef("unclean.leader.election.enable", B, "false", "Allow out-of-sync leaders."),
    ConfigDef("offsets.topic.num.partitions", INT, "50", "Partitions of __consumer_offsets.", at_least(1)),
    ConfigDef("offsets.topic.replication.factor", ConfigType.SHORT, "1",
              "Replication factor of __consumer_offsets (kmirror default 1; Kafka 3).", at_least(1)),
    ConfigDef("offsets.topic.segment.bytes", INT, "104857600", "Segment size of __consumer_offsets.", at_least(1)),
    ConfigDef("offsets.retention.minutes", INT, "10080", "Committed offset retention.", at_least(1)),
    ConfigDef("offsets.retention.check.interval.ms", L, "600000", "Offset expiry check period.", at_least(1)),
    ConfigDef("group.initial.rebalance.delay.ms", INT, "3000", "Delay of the first rebalance.", at_least(0)),
    ConfigDef("group.min.session.timeout.ms", INT, "6000", "Minimum session timeout."),
    ConfigDef("group.max.session.timeout.ms", INT, "1800000", "Maximum session timeout."),
    ConfigDef("group.max.size", INT, str(2**31 - 1), "Maximum group members.", at_least(1)),
    ConfigDef("socket.request.max.bytes", INT, "104857600", "Largest request size.", at_least(1)),
    ConfigDef("queued.max.requests", INT, "500",
              "Requests read but not yet answered, per listener, before the listener stops reading.",
              at_least(1)),
    ConfigDef("fetch.max.bytes", INT, "57671680", "Largest Fetch response the broker builds.", at_least(1024)),
    ConfigDef("max.connections", INT, str(2**31 - 1), "Connections allowed per listener.", at_least(0)),
    ConfigDef("max.connections.per.ip", INT, str(2**31 - 1), "Connections allowed from one address.",
              at_least(0)),
    ConfigDef("max.connections.per.ip.overrides", S, "",
              "Per-address connection limits: host:count,host:count."),
    ConfigDef("max.partitions", INT, "100000",
              "kmirror (KIP-578's cluster-wide limit): partitions the cluster may hold; "
              "CreateTopics/CreatePartitions past it fail with POLICY_VIOLATION.", at_least(1)),
    ConfigDef("socket.send.buffer.bytes", INT, "102400", "Accepted, ignored."),
    ConfigDef("socket.receive.buffer.bytes", INT, "102400", "Accepted, ignored."),
    ConfigDef("num.network.threads", INT, "3", "Accepted, ignored (one asyncio loop).", at_least(1)),
    ConfigDef("num.io.threads", INT, "8", "Accepted, ignored (one asyncio loop).", at_least(1)),
    ConfigDef("num.recovery.threads.per.data.dir", INT, "2", "Accepted, ignored.", at_least(1)),
    ConfigDef("broker.rack", S, None, "Rack of this broker."),
    ConfigDef("replica.lag.time.max.ms", L, "30000", "Time before a follower leaves the ISR.", at_least(0)),
    ConfigDef("broker.heartbeat.interval.ms", INT, "2000", "Broker heartbeat period to the controller.", at_least(1)),
    ConfigDef("broker.session.timeout.ms", INT, "9000", "Controller fences a broker silent this long.", at_least(1)),
    ConfigDef("replica.selector.class", S, None,
              "KIP-392 selector for consumer fetches; org.apache.kafka.common.replica.RackAwareReplicaSelector "
              "enables fetching from a follower in the consumer's rack."),
    ConfigDef("replica.fetch.wait.max.ms", INT, "500", "Follower fetch max wait.", at_least(0)),
    ConfigDef("replica.fetch.min.bytes", INT, "1", "Follower fetch min bytes.", at_least(1)),
    ConfigDef("replica.fetch.response.max.bytes", INT, "10485760", "Follower fetch response limit.", at_least(0)),
    ConfigDef("replica.fetch.backoff.ms", INT, "1000", "Follower backoff after a fetch error.", at_least(0)),
    ConfigDef("replica.fetch.max.bytes", INT, "1048576", "Follower fetch size per partition.", at_least(0)),
    ConfigDef("auto.leader.rebalance.enable", B, "true", "Move leaders back to preferred replicas."),
    ConfigDef("leader.imbalance.check.interval.seconds", L, "300", "Leader balance check period.", at_least(1)),
    ConfigDef("metrics.port", INT, "0", "kmirror: Prometheus text endpoint port (0 = off).", between(0, 65535)),
    ConfigDef("cluster.id", S, None, "kmirror: cluster id used when formatting an empty metadata log."),
    ConfigDef("transaction.state.log.replication.factor", ConfigType.SHORT, "1", "Accepted."),
    ConfigDef("transaction.state.log.min.isr", INT, "1", "Accepted."),
    ConfigDef("transaction.state.log.num.partitions", INT, "50", "Accepted."),
    ConfigDef("transaction.state.log.segment.bytes", INT, "104857600", "Accepted."),
    ConfigDef("share.coordinator.state.topic.replication.factor", ConfigType.SHORT, "1", "Accepted, ignored."),
    ConfigDef("share.coordinator.state.topic.min.isr", ConfigType.SHORT, "1", "Accepted, ignored."),
)

# Listener security (docs/operations.md "Listeners and security"); each may also be given per
# listener as listener.name.<listener>.<key> (kmirror.security.listener_config).
P = ConfigType.PASSWORD
_SECURITY_DEFS = (
    ConfigDef("ssl.keystore.type", S, "JKS", "Keystore format; kmirror supports PEM."),
    ConfigDef("ssl.keystore.location", S, None, "PEM file with the private key and certificate chain."),
    ConfigDef("ssl.keystore.password", P, None, "Password of the keystore's private key.", sensitive=True),
    ConfigDef("ssl.key.password", P, None, "Password of the private key.", sensitive=True),
    ConfigDef("ssl.keystore.certificate.chain", P, None, "Inline PEM certificate chain.", sensitive=True),
    ConfigDef("ssl.keystore.key", P, None, "Inline PEM private key.", sensitive=True),
    ConfigDef("ssl.truststore.type", S, "JKS", "Truststore format; kmirror supports PEM."),
    ConfigDef("ssl.truststore.location", S, None, "PEM file with the trusted CA certificates."),
    ConfigDef("ssl.truststore.password", P, None, "Accepted, ignored (PEM truststores).", sensitive=True),
    ConfigDef("ssl.truststore.certificates", P, None, "Inline PEM CA certificates.", sensitive=True),
    ConfigDef("ssl.client.auth", S, "none", "Client certificate: none, requested or required.",
              one_of("none", "requested", "required")),
    ConfigDef("ssl.enabled.protocols", LI, "TLSv1.2,TLSv1.3", "Accepted (TLS 1.2 and 1.3 are enabled)."),
    ConfigDef("ssl.protocol", S, "TLSv1.3", "Accepted, ignored."),
    ConfigDef("ssl.cipher.suites", LI, "", "Accepted, ignored (Python's defaults)."),
    ConfigDef("ssl.endpoint.identification.algorithm", S, "https", "Accepted (inter-broker traffic is PLAINTEXT)."),
    ConfigDef("sasl.enabled.mechanisms", LI, "GSSAPI", "SASL mechanisms of SASL listeners; kmirror supports PLAIN."),
    ConfigDef("sasl.mechanism.inter.broker.protocol", S, "GSSAPI", "Accepted (inter-broker traffic is PLAINTEXT)."),
    ConfigDef("sasl.jaas.config", P, None, "JAAS login module config (listener-prefixed form preferred).",
              sensitive=True),
)


# KIP-1279 broker configs, KIP defaults. Spelled here, not imported from
# kmirror.mirror.config (which imports this package: a cycle); a unit test keeps the two equal.
_MIRROR_DEFS = (
    ConfigDef("mirror.topic.num.partitions", INT, "50",
              "Number of partitions for the __mirror_state internal topic.", at_least(1)),
    ConfigDef("mirror.topic.replication.factor", ConfigType.SHORT, "3",
              "Replication factor for the __mirror_state internal topic.", at_least(1)),
    ConfigDef("mirror.num.replica.fetchers", INT, "1",
              "Number of fetcher threads per mirrored source broker.", at_least(1)),
    ConfigDef("mirror.metadata.refresh.interval.ms", L, "30000",
              "Interval at which the coordinator refreshes metadata from source clusters.", at_least(1)),
    ConfigDef("mirror.replication.throttled.rate", L, str(LONG_MAX),
              "Upper bound (bytes/sec) on mirror replication traffic of throttled replicas.", at_least(0)),
)

BROKER_CONFIG_DEFS: dict[str, ConfigDef] = {d.name: d for d in (*_DEFS, *_SECURITY_DEFS, *_MIRROR_DEFS)}
