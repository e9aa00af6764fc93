"""The options of Spark's Kafka source and sink, parsed and checked (sans-IO).

Names, defaults and meanings are those of Spark's `KafkaSourceProvider` (Structured
Streaming + Kafka Integration Guide); option names are case-insensitive, as Spark's.
Every mistake is one `KafkaOptionError` whose message names the option and what is
expected. Where Spark silently ignores an option it does not know, kmirror refuses it
(a misspelt `startingOffset` would otherwise read from the default without a word).

`kafka.*` options are Kafka client configs. The ones kmirror's client honours are used
(`bootstrap.servers`, `security.protocol`, `sasl.*`, `ssl.*`, `isolation.level`,
`client.id`, `request.timeout.ms`, fetch sizes, producer `acks`/`compression.type`/
`linger.ms`/`batch.size`/`retries`); other Kafka client configs are accepted and have no
effect, as the Java client warns and goes on; names that are no Kafka client config are
refused. Spark's own refusals are kept (`kafka.auto.offset.reset`, deserializers, ...).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from kmirror.client.configs import CLIENT_SECURITY_KEYS, SecurityConfigError, validate_security_configs
from kmirror.records.compression import CompressionType
from kmirror.types import TopicPartition


class KafkaOptionError(ValueError):
    """A source or sink option that cannot be used; the message is the whole story."""


EARLIEST: Final = -2
LATEST: Final = -1

OFFSETS_EXAMPLE: Final = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
TIMESTAMPS_EXAMPLE: Final = '{"topicA":{"0":1700000000000,"1":1700000000000}}'
ASSIGN_EXAMPLE: Final = '{"topicA":[0,1],"topicB":[2,4]}'
STRATEGIES: Final = ("assign", "subscribe", "subscribePattern")

SOURCE_OPTIONS: Final = frozenset(o.lower() for o in (
    "assign", "subscribe", "subscribePattern", "startingOffsets", "endingOffsets", "startingTimestamp",
    "endingTimestamp", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay", "minPartitions",
    "maxRecordsPerPartition", "includeHeaders", "groupIdPrefix", "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries", "fetchOffset.retryIntervalMs", "path", "kmirror.source.pushFilters",
    "kmirror.delegationToken", "kmirror.delegationToken.mechanism",
))
# A kmirror source option: batch reads take Spark's pushed filters on topic, partition and offset
# (`pushdown`). PySpark refuses any read whose reader takes pushed filters while the session's
# `spark.sql.python.filterPushdown.enabled` is false (its default), so this is asked for explicitly.
PUSH_FILTERS: Final = "kmirror.source.pushFilters"
# The tasks log in with a delegation token of the driver's user (`kmirror.spark.delegation_token`).
DELEGATION_TOKEN: Final = "kmirror.delegationToken"
DELEGATION_TOKEN_MECHANISM: Final = "kmirror.delegationToken.mechanism"
# kmirror's own sink options (Spark's Kafka sink has no exactly-once mode to name them after).
EXACTLY_ONCE: Final = "kmirror.sink.exactlyOnce"
TRANSACTIONAL_ID_PREFIX: Final = "kmirror.sink.transactionalIdPrefix"
SINK_OPTIONS: Final = frozenset(o.lower() for o in ("topic", "includeHeaders", "path", "checkpointLocation",
                                                     EXACTLY_ONCE, TRANSACTIONAL_ID_PREFIX, DELEGATION_TOKEN,
                                                     DELEGATION_TOKEN_MECHANISM))

# Kafka client configs kmirror reads (without the `kafka.` prefix).
_HONOURED: Final = frozenset({
    "bootstrap.servers", "client.id", "request.timeout.ms", "isolation.level", "fetch.max.bytes",
    "max.partition.fetch.bytes", "fetch.max.wait.ms", "fetch.min.bytes", "acks", "compression.type", "linger.ms",
    "batch.size", "retries", "enable.idempotence", "delivery.timeout.ms", "max.in.flight.requests.per.connection",
    "transaction.timeout.ms",
    *CLIENT_SECURITY_KEYS,
})
# Kafka client configs accepted without effect (kmirror's client has no such knob).
_ACCEPTED: Final = frozenset({
    "group.id", "group.instance.id", "session.timeout.ms", "heartbeat.interval.ms", "max.poll.records",
    "max.poll.interval.ms", "metadata.max.age.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms",
    "retry.backoff.ms", "retry.backoff.max.ms", "receive.buffer.bytes", "send.buffer.bytes",
    "connections.max.idle.ms", "client.rack", "default.api.timeout.ms", "check.crcs",
    "socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms", "max.request.size",
    "buffer.memory", "max.block.ms", "metric.reporters", "metrics.num.samples", "metrics.sample.window.ms",
    "metrics.recording.level", "client.dns.lookup", "allow.auto.create.topics", "partitioner.class",
    "partitioner.ignore.keys", "partitioner.adaptive.partitioning.enable", "security.providers",
    "sasl.kerberos.service.name", "sasl.login.class", "sasl.client.callback.handler.class",
    "sasl.login.callback.handler.class", "ssl.cipher.suites", "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm", "ssl.secure.random.implementation", "ssl.provider",
    "ssl.engine.factory.class", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
})
# Spark's KafkaSourceProvider refuses these, with these reasons.
_SPARK_REFUSED_SOURCE: Final = {
    "auto.offset.reset": "set the source option 'startingOffsets' instead to specify where to start",
    "key.deserializer": "keys are always deserialized as byte arrays; use DataFrame operations to deserialize them",
    "value.deserializer": "values are always deserialized as byte arrays; use DataFrame operations to deserialize them",
    "enable.auto.commit": "offsets are tracked by the query's checkpoint, not committed to Kafka",
    "interceptor.classes": "interceptors would see the raw bytes of every record and are not supported",
}
_SPARK_REFUSED_SINK: Final = {
    "key.serializer": "keys are always serialized with a ByteArraySerializer or StringSerializer; "
                      "use DataFrame operations to serialize them into strings or byte arrays",
    "value.serializer": "values are always serialized with a ByteArraySerializer or StringSerializer; "
                        "use DataFrame operations to serialize them into strings or byte arrays",
    "transactional.id": f"each task derives its own from the query id and partition with option '{EXACTLY_ONCE}' "
                        f"(prefix: option '{TRANSACTIONAL_ID_PREFIX}')",
}
_PREFIX_OK: Final = ("sasl.", "ssl.", "metrics.", "reconnect.")


@dataclass(frozen=True, slots=True)
class Subscription:
    """Exactly one of Spark's strategies: a topic list, a pattern or assigned partitions."""

    strategy: str  # "subscribe" | "subscribePattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    assigned: tuple[TopicPartition, ...] = ()

    def describe(self) -> str:
        if self.strategy == "subscribe":
            return f"subscribe={','.join(self.topics)}"
        if self.strategy == "subscribePattern":
            return f"subscribePattern={self.pattern}"
        return f"assign={','.join(str(tp) for tp in self.assigned)}"


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    """Where a range starts or ends (Spark's KafkaOffsetRangeLimit): "earliest", "latest",
    "offsets" (per partition, -2 earliest / -1 latest), "timestamps" (per partition) or
    "timestamp" (one for every partition)."""

    kind: str
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int = -1

    @property
    def option_name(self) -> str:
        return {"offsets": "Offsets", "timestamps": "OffsetsByTimestamp", "timestamp": "Timestamp"}.get(
            self.kind, "Offsets")


@dataclass(frozen=True, slots=True)
class SourceOptions:
    client_configs: Mapping[str, str]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    isolation_level: int = 0
    starting_by_timestamp_strategy: str = "error"
    poll_timeout_ms: int = 120_000
    push_filters: bool = False
    delegation_token_mechanism: str | None = None  # the tasks' token login; None: the driver's login

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == 1


@dataclass(frozen=True, slots=True)
class SinkOptions:
    client_configs: Mapping[str, str]
    topic: str | None
    include_headers: bool
    acks: int
    compression: int
    batch_size: int
    linger_ms: int
    retries: int
    delivery_timeout_ms: int
    exactly_once: bool = False
    transactional_id_prefix: str = "kmirror-sink-"
    transaction_timeout_ms: int = 60_000
    delegation_token_mechanism: str | None = None  # the tasks' token login; None: the driver's login


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _client_configs(options: Mapping[str, str], refused: Mapping[str, str]) -> dict[str, str]:
    configs: dict[str, str] = {}
    for key, value in options.items():
        if not key.startswith("kafka."):
            continue
        name = key[len("kafka."):]
        if name in refused:
            raise KafkaOptionError(f"Kafka option 'kafka.{name}' is not supported: {refused[name]}")
        if name not in _HONOURED and name not in _ACCEPTED and not name.startswith(_PREFIX_OK):
            raise KafkaOptionError(f"unknown Kafka client config 'kafka.{name}'")
        configs[name] = value
    if not configs.get("bootstrap.servers", "").strip():
        raise KafkaOptionError("option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer")
    try:
        validate_security_configs(configs)
    except SecurityConfigError as exc:
        raise KafkaOptionError(f"invalid Kafka security option (kafka.*): {exc}") from None
    return configs


_CANONICAL: Final = {n.lower(): n for n in (
    "assign", "subscribe", "subscribePattern", "startingOffsets", "endingOffsets", "startingTimestamp",
    "endingTimestamp", "startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy",
    "failOnDataLoss", "maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay", "minPartitions",
    "maxRecordsPerPartition", "includeHeaders", "groupIdPrefix", "kafkaConsumer.pollTimeoutMs",
    "fetchOffset.numRetries", "fetchOffset.retryIntervalMs", "topic", "checkpointLocation", "path", EXACTLY_ONCE,
    TRANSACTIONAL_ID_PREFIX, PUSH_FILTERS, DELEGATION_TOKEN, DELEGATION_TOKEN_MECHANISM)}


def _unknown(options: Mapping[str, str], known: frozenset[str], what: str) -> None:
    for key in sorted(options):
        if not key.startswith("kafka.") and key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f" (did you mean '{_CANONICAL.get(close[0], close[0])}'?)" if close else ""
            raise KafkaOptionError(f"unknown option '{key}' for the kmirror {what}{hint}")


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    value = options.get(name.lower())
    if value is None:
        return default
    v = value.strip().lower()
    if v not in ("true", "false"):
        raise KafkaOptionError(f"option '{name}' must be true or false, got '{value}'")
    return v == "true"


def _positive_int(options: Mapping[str, str], name: str) -> int | None:
    value = options.get(name.lower())
    if value is None:
        return None
    try:
        n = int(value.strip())
    except ValueError:
        raise KafkaOptionError(f"option '{name}' must be a positive integer, got '{value}'") from None
    if n <= 0:
        raise KafkaOptionError(f"option '{name}' must be a positive integer, got '{value}'")
    return n


_TIME_UNITS_MS: Final = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
                          "d": 86_400_000}


def _duration_ms(options: Mapping[str, str], name: str, default_ms: int) -> int:
    """Spark's `Utils.timeStringAsMs`: an integer with an optional unit (us, ms, s, m, min,
    h, d; milliseconds without one), e.g. "15m" or "30s"."""
    value = options.get(name.lower())
    if value is None:
        return default_ms
    found = re.fullmatch(r"([0-9]+)([a-z]+)?", value.strip().lower())
    if found is None or (found.group(2) or "ms") not in _TIME_UNITS_MS:
        raise KafkaOptionError(f"option '{name}' must be a duration such as 15m, 30s or 500ms, got '{value}'")
    return int(int(found.group(1)) * _TIME_UNITS_MS[found.group(2) or "ms"])


def _json_object(name: str, value: str, example: str) -> dict[str, object]:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict) or not parsed:
        raise KafkaOptionError(f"invalid JSON in option '{name}': expected e.g. {example}, got '{value}'")
    return parsed


def parse_partition_map(name: str, value: str, example: str = OFFSETS_EXAMPLE) -> dict[TopicPartition, int]:
    """Spark's JsonUtils.partitionOffsets: {"topic":{"partition":number}}."""
    out: dict[TopicPartition, int] = {}
    for topic, parts in _json_object(name, value, example).items():
        if not isinstance(parts, dict) or not parts:
            raise KafkaOptionError(f"invalid JSON in option '{name}': expected e.g. {example}, got '{value}'")
        for p, v in parts.items():
            if not str(p).lstrip("-").isdigit() or int(p) < 0 or isinstance(v, bool) or not isinstance(v, int):
                raise KafkaOptionError(f"invalid JSON in option '{name}': expected e.g. {example}, got '{value}'")
            out[TopicPartition(topic, int(p))] = v
    return out


def _assign(value: str) -> tuple[TopicPartition, ...]:
    out: list[TopicPartition] = []
    for topic, parts in _json_object("assign", value, ASSIGN_EXAMPLE).items():
        if (not isinstance(parts, list) or not parts
                or any(isinstance(p, bool) or not isinstance(p, int) or p < 0 for p in parts)):
            raise KafkaOptionError(f"invalid JSON in option 'assign': expected e.g. {ASSIGN_EXAMPLE}, got '{value}'")
        out.extend(TopicPartition(topic, p) for p in parts)
    return tuple(sorted(set(out)))


def _subscription(options: Mapping[str, str]) -> Subscription:
    given = [s for s in STRATEGIES if s.lower() in options]
    if not given:
        raise KafkaOptionError("one of the options 'assign', 'subscribe', 'subscribePattern' must be specified "
                               "for the kmirror source")
    if len(given) > 1:
        raise KafkaOptionError("only one of the options 'assign', 'subscribe', 'subscribePattern' can be "
                               f"specified for the kmirror source; got {', '.join(repr(g) for g in given)}")
    strategy = given[0]
    value = options[strategy.lower()]
    if strategy == "assign":
        return Subscription("assign", assigned=_assign(value))
    if strategy == "subscribe":
        topics = tuple(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise KafkaOptionError(f"no topics to subscribe to: option 'subscribe' is '{value}'")
        return Subscription("subscribe", topics=topics)
    if not value.strip():
        raise KafkaOptionError("pattern to subscribe is empty: option 'subscribePattern' is ''")
    try:
        re.compile(value)
    except re.error as exc:
        raise KafkaOptionError(f"option 'subscribePattern' is not a valid regular expression: {exc}") from None
    return Subscription("subscribePattern", pattern=value)


def _offset_spec(options: Mapping[str, str], which: str, default: str) -> OffsetSpec:
    """Spark's precedence: <which>Timestamp, then <which>OffsetsByTimestamp, then <which>Offsets."""
    ts = options.get(f"{which}timestamp")
    if ts is not None:
        try:
            value = int(ts.strip())
        except ValueError:
            raise KafkaOptionError(f"option '{which}Timestamp' must be a timestamp in milliseconds, got '{ts}'") from None
        if value < 0:
            raise KafkaOptionError(f"option '{which}Timestamp' must be a timestamp in milliseconds, got '{ts}'")
        return OffsetSpec("timestamp", timestamp=value)
    by_ts = options.get(f"{which}offsetsbytimestamp")
    if by_ts is not None:
        name = f"{which}OffsetsByTimestamp"
        timestamps = parse_partition_map(name, by_ts, TIMESTAMPS_EXAMPLE)
        for tp, t in timestamps.items():
            if t < 0:
                raise KafkaOptionError(f"option '{name}': timestamp {t} for {tp} is negative")
        return OffsetSpec("timestamps", offsets=timestamps)
    raw = options.get(f"{which}offsets", default).strip()
    if raw.lower() == "earliest":
        return OffsetSpec("earliest")
    if raw.lower() == "latest":
        return OffsetSpec("latest")
    name = f"{which}Offsets"
    offsets = parse_partition_map(name, raw)
    for tp, o in offsets.items():
        if o < EARLIEST:
            raise KafkaOptionError(f"option '{name}': offset {o} for {tp} is invalid (use -2 for earliest, -1 for latest)")
    return OffsetSpec("offsets", offsets=offsets)


def parse_source_options(raw: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    """Spark's Kafka source options for a batch (`streaming=False`) or streaming read."""
    options = _lower(raw)
    _unknown(options, SOURCE_OPTIONS, "source")
    subscription = _subscription(options)
    configs = _client_configs(options, _SPARK_REFUSED_SOURCE)
    starting = _offset_spec(options, "starting", "latest" if streaming else "earliest")
    if streaming:
        for name in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
            if name.lower() in options:
                raise KafkaOptionError(f"option '{name}' is not valid in streaming queries")
        ending = OffsetSpec("latest")
    else:
        ending = _offset_spec(options, "ending", "latest")
        if starting.kind == "latest" or (starting.kind == "offsets" and LATEST in starting.offsets.values()):
            bad = "" if starting.kind == "latest" else " for " + ", ".join(
                str(tp) for tp, o in starting.offsets.items() if o == LATEST)
            raise KafkaOptionError(f"option 'startingOffsets'{bad} can't be latest for batch queries")
        if ending.kind == "earliest" or (ending.kind == "offsets" and EARLIEST in ending.offsets.values()):
            bad = "" if ending.kind == "earliest" else " for " + ", ".join(
                str(tp) for tp, o in ending.offsets.items() if o == EARLIEST)
            raise KafkaOptionError(f"option 'endingOffsets'{bad} can't be earliest for batch queries")
    isolation = configs.get("isolation.level", "read_uncommitted").strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise KafkaOptionError(f"option 'kafka.isolation.level' must be read_uncommitted or read_committed, "
                               f"got '{configs['isolation.level']}'")
    strategy = options.get("startingoffsetsbytimestampstrategy", "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise KafkaOptionError(f"option 'startingOffsetsByTimestampStrategy' must be error or latest, got '{strategy}'")
    poll_timeout = _positive_int(options, "kafkaConsumer.pollTimeoutMs")
    max_per_trigger = _positive_int(options, "maxOffsetsPerTrigger")
    min_per_trigger = _positive_int(options, "minOffsetsPerTrigger")
    if min_per_trigger is not None and max_per_trigger is not None and min_per_trigger > max_per_trigger:
        raise KafkaOptionError(f"the value of minOffsetsPerTrigger ({min_per_trigger}) is higher than the "
                               f"maxOffsetsPerTrigger ({max_per_trigger})")
    return SourceOptions(
        client_configs=configs,
        subscription=subscription,
        starting=starting,
        ending=ending,
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        max_offsets_per_trigger=max_per_trigger,
        min_offsets_per_trigger=min_per_trigger,
        max_trigger_delay_ms=_duration_ms(options, "maxTriggerDelay", 15 * 60 * 1000),
        min_partitions=_positive_int(options, "minPartitions"),
        max_records_per_partition=_positive_int(options, "maxRecordsPerPartition"),
        include_headers=_bool(options, "includeHeaders", False),
        isolation_level=1 if isolation == "read_committed" else 0,
        starting_by_timestamp_strategy=strategy,
        poll_timeout_ms=poll_timeout or 120_000,
        push_filters=_bool(options, PUSH_FILTERS, False),
        delegation_token_mechanism=_token_mechanism(options, configs),
    )


def _token_mechanism(options: Mapping[str, str], configs: Mapping[str, str]) -> str | None:
    """Option `kmirror.delegationToken`: the SCRAM mechanism the tasks log in with, or None."""
    mechanism = options.get(DELEGATION_TOKEN_MECHANISM.lower(), "SCRAM-SHA-512").strip().upper()
    if not _bool(options, DELEGATION_TOKEN, False):
        return None
    if mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        raise KafkaOptionError(f"option '{DELEGATION_TOKEN_MECHANISM}' must be SCRAM-SHA-256 or SCRAM-SHA-512, "
                               f"got '{mechanism}'")
    protocol = configs.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        raise KafkaOptionError(f"option '{DELEGATION_TOKEN}' needs 'kafka.security.protocol' SASL_PLAINTEXT or "
                               f"SASL_SSL (the tasks log in with the token through SASL), got '{protocol}'")
    return mechanism


def _int_config(configs: Mapping[str, str], name: str, default: int) -> int:
    value = configs.get(name)
    if value is None:
        return default
    try:
        return int(value.strip())
    except ValueError:
        raise KafkaOptionError(f"option 'kafka.{name}' must be an integer, got '{value}'") from None


def parse_sink_options(raw: Mapping[str, str]) -> SinkOptions:
    """Spark's Kafka sink options."""
    options = _lower(raw)
    _unknown(options, SINK_OPTIONS, "sink")
    configs = _client_configs(options, _SPARK_REFUSED_SINK)
    acks_raw = configs.get("acks", "all").strip().lower()
    if acks_raw not in ("all", "-1"):
        raise KafkaOptionError(f"option 'kafka.acks' must be all (or -1): the kmirror sink always writes with an "
                               f"idempotent producer, which needs acks=all; got '{acks_raw}'")
    acks = -1
    try:
        compression = int(CompressionType.from_name(configs.get("compression.type", "none")))
    except ValueError:
        raise KafkaOptionError(f"option 'kafka.compression.type' must be one of none, gzip, snappy, lz4, zstd, "
                               f"got '{configs.get('compression.type')}'") from None
    topic = options.get("topic")
    if topic is not None and not topic.strip():
        raise KafkaOptionError("option 'topic' is empty")
    return SinkOptions(
        client_configs=configs,
        topic=topic.strip() if topic else None,
        include_headers=_bool(options, "includeHeaders", False),
        acks=acks,
        compression=compression,
        batch_size=_int_config(configs, "batch.size", 1024 * 1024),
        linger_ms=_int_config(configs, "linger.ms", 5),
        retries=_int_config(configs, "retries", 2147483647),
        delivery_timeout_ms=_int_config(configs, "delivery.timeout.ms", 120_000),
        exactly_once=_bool(options, EXACTLY_ONCE, False),
        transactional_id_prefix=options.get(TRANSACTIONAL_ID_PREFIX.lower(), "kmirror-sink-"),
        transaction_timeout_ms=_int_config(configs, "transaction.timeout.ms", 60_000),
        delegation_token_mechanism=_token_mechanism(options, configs),
    )
