"""Spark's Kafka source and sink options: names, defaults, precedence, one message per mistake."""

from __future__ import annotations

import pytest

from kmirror.spark.options import KafkaOptionError, parse_sink_options, parse_source_options
from kmirror.types import TopicPartition

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def source(streaming: bool = False, **options: str) -> object:
    return parse_source_options({**BASE, **options}, streaming=streaming)


def error(streaming: bool = False, **options: str) -> str:
    with pytest.raises(KafkaOptionError) as info:
        parse_source_options(options, streaming=streaming)
    return str(info.value)


def test_defaults_follow_spark_batch_and_streaming() -> None:
    batch = parse_source_options({**BASE, "subscribe": "a, b"}, streaming=False)
    assert batch.subscription.topics == ("a", "b")
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert batch.fail_on_data_loss and not batch.include_headers and batch.isolation_level == 0
    stream = parse_source_options({**BASE, "subscribe": "a"}, streaming=True)
    assert stream.starting.kind == "latest"


def test_option_names_are_case_insensitive_and_json_offsets_parse() -> None:
    opts = parse_source_options({**BASE, "SUBSCRIBEPATTERN": "orders-.*", "StartingOffsets": '{"t":{"0":5,"1":-2}}',
                                 "endingOffsets": '{"t":{"0":-1,"1":9}}', "kafka.isolation.level": "read_committed",
                                 "includeHeaders": "TRUE", "minPartitions": "8"}, streaming=False)
    assert opts.subscription.pattern == "orders-.*"
    assert dict(opts.starting.offsets) == {TopicPartition("t", 0): 5, TopicPartition("t", 1): -2}
    assert dict(opts.ending.offsets) == {TopicPartition("t", 0): -1, TopicPartition("t", 1): 9}
    assert opts.read_committed and opts.include_headers and opts.min_partitions == 8


def test_timestamp_options_take_precedence_as_in_spark() -> None:
    opts = parse_source_options({**BASE, "assign": '{"t":[0,1]}', "startingOffsets": "earliest",
                                 "startingOffsetsByTimestamp": '{"t":{"0":1000,"1":2000}}',
                                 "startingTimestamp": "1500", "endingOffsetsByTimestamp": '{"t":{"0":3000,"1":4000}}'},
                                streaming=False)
    assert opts.subscription.assigned == (TopicPartition("t", 0), TopicPartition("t", 1))
    assert (opts.starting.kind, opts.starting.timestamp) == ("timestamp", 1500)
    assert opts.ending.kind == "timestamps" and opts.ending.offsets[TopicPartition("t", 1)] == 4000


@pytest.mark.parametrize(("options", "message"), [
    ({}, "one of the options 'assign', 'subscribe', 'subscribePattern' must be specified"),
    ({"subscribe": "a", "assign": '{"a":[0]}'}, "only one of the options 'assign', 'subscribe', 'subscribePattern'"),
    ({"subscribe": " , "}, "no topics to subscribe to"),
    ({"subscribePattern": "("}, "option 'subscribePattern' is not a valid regular expression"),
    ({"assign": "[0,1]"}, "invalid JSON in option 'assign': expected e.g. {\"topicA\":[0,1]"),
    ({"subscribe": "a", "startingOffsets": '{"a":{"0":"x"}}'}, "invalid JSON in option 'startingOffsets'"),
    ({"subscribe": "a", "startingOffsets": "{not json"}, "invalid JSON in option 'startingOffsets'"),
    ({"subscribe": "a", "endingOffsets": '{"a":{"0":-3}}'}, "offset -3 for a-0 is invalid"),
    ({"subscribe": "a", "startingOffsets": "latest"}, "option 'startingOffsets' can't be latest for batch queries"),
    ({"subscribe": "a", "startingOffsets": '{"a":{"0":-1}}'}, "'startingOffsets' for a-0 can't be latest"),
    ({"subscribe": "a", "endingOffsets": "earliest"}, "option 'endingOffsets' can't be earliest for batch queries"),
    ({"subscribe": "a", "startingOffset": "earliest"},
     "unknown option 'startingoffset' for the kmirror source (did you mean 'startingOffsets'?)"),
    ({"subscribe": "a", "failOnDataLoss": "maybe"}, "option 'failOnDataLoss' must be true or false"),
    ({"subscribe": "a", "maxOffsetsPerTrigger": "0"}, "option 'maxOffsetsPerTrigger' must be a positive integer"),
    ({"subscribe": "a", "minOffsetsPerTrigger": "-5"}, "option 'minOffsetsPerTrigger' must be a positive integer"),
    ({"subscribe": "a", "minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "15"},
     "the value of minOffsetsPerTrigger (20) is higher than the maxOffsetsPerTrigger (15)"),
    ({"subscribe": "a", "maxTriggerDelay": "soon"}, "option 'maxTriggerDelay' must be a duration such as 15m"),
    ({"subscribe": "a", "maxTriggerDelay": "5 weeks"}, "option 'maxTriggerDelay' must be a duration"),
    ({"subscribe": "a", "maxTriggerDelay": "-1s"}, "option 'maxTriggerDelay' must be a duration"),
    ({"subscribe": "a", "startingTimestamp": "yesterday"}, "option 'startingTimestamp' must be a timestamp"),
    ({"subscribe": "a", "kafka.isolation.level": "serializable"}, "'kafka.isolation.level' must be read_uncommitted"),
    ({"subscribe": "a", "kafka.auto.offset.reset": "earliest"}, "Kafka option 'kafka.auto.offset.reset' is not "
                                                               "supported: set the source option 'startingOffsets'"),
    ({"subscribe": "a", "kafka.bootstrap.server": "x:1"}, "unknown Kafka client config 'kafka.bootstrap.server'"),
    ({"subscribe": "a", "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN"},
     "'sasl.jaas.config' is required"),
    ({"subscribe": "a", "kmirror.delegationToken": "true"},
     "option 'kmirror.delegationToken' needs 'kafka.security.protocol' SASL_PLAINTEXT or SASL_SSL"),
    ({"subscribe": "a", "kmirror.delegationToken": "true", "kmirror.delegationToken.mechanism": "PLAIN"},
     "option 'kmirror.delegationToken.mechanism' must be SCRAM-SHA-256 or SCRAM-SHA-512"),
])
def test_each_mistake_has_one_clear_message(options: dict[str, str], message: str) -> None:
    assert message in error(**{**BASE, **options})


def test_bootstrap_servers_are_required() -> None:
    assert "option 'kafka.bootstrap.servers' must be specified" in error(subscribe="a")


def test_ending_options_are_refused_in_streaming_queries() -> None:
    assert "option 'endingOffsets' is not valid in streaming queries" in error(
        streaming=True, **BASE, subscribe="a", endingOffsets="latest")


def test_spark_options_without_effect_are_accepted() -> None:
    parse_source_options({**BASE, "subscribe": "a", "groupIdPrefix": "g", "kafkaConsumer.pollTimeoutMs": "5000",
                          "kafka.max.poll.records": "500", "kafka.ssl.cipher.suites": "x"}, streaming=True)


def test_trigger_limits_and_spark_time_strings() -> None:
    opts = parse_source_options({**BASE, "subscribe": "a"}, streaming=True)
    assert (opts.min_offsets_per_trigger, opts.max_offsets_per_trigger, opts.max_trigger_delay_ms) == \
        (None, None, 15 * 60 * 1000)  # Spark's default maxTriggerDelay: 15m
    for given, ms in (("30s", 30_000), ("15m", 900_000), ("2min", 120_000), ("1h", 3_600_000), ("1d", 86_400_000),
                      ("250", 250), ("250ms", 250), (" 5S ", 5_000), ("1500us", 1)):
        opts = parse_source_options({**BASE, "subscribe": "a", "minOffsetsPerTrigger": "10",
                                     "maxOffsetsPerTrigger": "10", "maxTriggerDelay": given}, streaming=True)
        assert (opts.min_offsets_per_trigger, opts.max_offsets_per_trigger, opts.max_trigger_delay_ms) == (10, 10, ms)


def test_sink_options() -> None:
    opts = parse_sink_options({**BASE, "topic": "out", "kafka.compression.type": "zstd", "kafka.linger.ms": "0"})
    assert (opts.topic, opts.compression, opts.acks, opts.linger_ms) == ("out", 4, -1, 0)
    for options, message in [
        ({"kafka.acks": "1"}, "option 'kafka.acks' must be all (or -1): the kmirror sink always writes with an "
                              "idempotent producer"),
        ({"kafka.compression.type": "brotli"}, "'kafka.compression.type' must be one of"),
        ({"kafka.value.serializer": "x"}, "Kafka option 'kafka.value.serializer' is not supported"),
        ({"kafka.transactional.id": "t"}, "each task derives its own from the query id and partition with option "
                                          "'kmirror.sink.exactlyOnce'"),
        ({"kmirror.sink.exactlyOnce": "yes"}, "option 'kmirror.sink.exactlyOnce' must be true or false, got 'yes'"),
        ({"kmirror.sink.exactlyonc": "true"}, "(did you mean 'kmirror.sink.exactlyOnce'?)"),
        ({"topics": "x"}, "unknown option 'topics' for the kmirror sink (did you mean 'topic'?)"),
    ]:
        with pytest.raises(KafkaOptionError, match=".*") as info:
            parse_sink_options({**BASE, **options})
        assert message in str(info.value)
