import asyncio

import pytest
from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.topics import CreatableTopic
from kmirror.testing.metadata import call, metadata_services, request_entity, server_config

TOPIC, BROKER = 2, 4


def _services(**cfg: str):
    services = metadata_services(server_config(**cfg))
    asyncio.run(services.metadata.create_topics([CreatableTopic("t", 1, 1, configs={"retention.ms": "100"})]))
    return services


def _describe(services, version: int, resources, synonyms=True, docs=True):
    res = tuple(
        request_entity(32, version, "DescribeConfigsResource", resource_type=t, resource_name=n, configuration_keys=k)
        for t, n, k in resources
    )
    return call(services, 32, version, {"resources": res, "include_synonyms": synonyms, "include_documentation": docs})


@pytest.mark.parametrize("version", range(1, 5))
def test_describe_topic_configs(version: int) -> None:
    services = _services(log_retention_hours="1", log_segment_bytes="2000000")
    resp = _describe(services, version, [(TOPIC, "t", None), (TOPIC, "missing", None), (TOPIC, "t", ("segment.bytes", "nope"))])
    ok, missing, one = resp.results
    assert ok.error_code == ErrorCode.none and missing.error_code == ErrorCode.unknown_topic_or_partition
    entries = {c.name: c for c in ok.configs}
    assert entries["retention.ms"].value == "100" and entries["retention.ms"].config_source == 1
    assert [(s.name, s.value, s.source) for s in entries["retention.ms"].synonyms] == [
        ("retention.ms", "100", 1),
        ("log.retention.hours", "1", 4),
        ("log.retention.hours", "168", 5),
    ]
    assert entries["segment.bytes"].value == "2000000" and entries["segment.bytes"].config_source == 4
    assert entries["cleanup.policy"].value == "delete" and entries["cleanup.policy"].config_source == 5
    assert entries["cleanup.policy"].read_only is False
    assert entries["segment.ms"].value == "604800000" and entries["segment.ms"].config_source == 5
    assert [c.name for c in one.configs] == ["segment.bytes"]
    if version >= 3:
        assert entries["retention.ms"].config_type == 5  # LONG
        assert entries["cleanup.policy"].config_type == 7  # LIST


def test_describe_without_synonyms_or_docs() -> None:
    resp = _describe(_services(), 4, [(TOPIC, "t", ("retention.ms",))], synonyms=False, docs=False)
    (c,) = resp.results[0].configs
    assert c.synonyms == () and c.documentation is None


def test_describe_broker() -> None:
    services = _services(num_partitions="4")
    resp = _describe(services, 4, [(BROKER, "1", ("num.partitions", "message.max.bytes")), (BROKER, "7", None), (BROKER, "", None)])
    mine, other, default = resp.results
    entries = {c.name: c for c in mine.configs}
    assert entries["num.partitions"].value == "4" and entries["num.partitions"].config_source == 4
    assert entries["num.partitions"].read_only is True
    assert entries["message.max.bytes"].value == "1048588" and entries["message.max.bytes"].read_only is False
    assert other.error_code == ErrorCode.invalid_request
    assert default.error_code == ErrorCode.none and default.configs == ()


def _incremental(services, version, resources, validate_only=False):
    res = tuple(
        request_entity(
            44, version, "AlterConfigsResource", resource_type=t, resource_name=n,
            configs=tuple(request_entity(44, version, "AlterableConfig", name=k, config_operation=op, value=v) for k, op, v in ops),
        )
        for t, n, ops in resources
    )
    return call(services, 44, version, {"resources": res, "validate_only": validate_only})


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_alter_configs(version: int) -> None:
    services = _services()
    resp = _incremental(
        services,
        version,
        [
            (TOPIC, "t", [("retention.ms", 1, None), ("cleanup.policy", 2, "compact"), ("segment.ms", 0, "5000")]),
            (TOPIC, "missing", [("retention.ms", 0, "1")]),
            (TOPIC, "t", [("retention.ms", 0, "soon")]),
            (TOPIC, "t", [("retention.ms", 2, "1")]),
            (TOPIC, "t", [("retention.ms", 9, "1")]),
            (BROKER, "1", [("message.max.bytes", 0, "2000")]),
            (BROKER, "1", [("node.id", 0, "3")]),
        ],
    )
    assert [r.error_code for r in resp.responses] == [
        ErrorCode.none,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.invalid_config,
        ErrorCode.invalid_config,
        ErrorCode.invalid_request,
        ErrorCode.none,
        ErrorCode.invalid_request,
    ]
    image = services.metadata.image
    assert dict(image.topic_config("t")) == {"cleanup.policy": "delete,compact", "segment.ms": "5000"}
    # a dynamic broker value shows up with source DYNAMIC_BROKER_CONFIG
    (entry,) = _describe(services, 4, [(BROKER, "1", ("message.max.bytes",))]).results[0].configs
    assert (entry.value, entry.config_source) == ("2000", 2)
    (entry,) = _describe(services, 4, [(TOPIC, "t", ("max.message.bytes",))]).results[0].configs
    assert (entry.value, entry.config_source) == ("2000", 2)


@pytest.mark.parametrize("value", ["0", "-1", "60"])
def test_offsets_retention_is_not_altered_at_runtime_as_in_kafka(value: str) -> None:
    services = _services()
    for resource in ("1", ""):
        response = _incremental(services, 1, [(BROKER, resource, [("offsets.retention.minutes", 0, value)])]).responses[0]
        assert response.error_code == ErrorCode.invalid_request
        assert "Cannot update these configs dynamically: offsets.retention.minutes" in (response.error_message or "")
    configs = services.metadata.image.configs
    assert not any("offsets.retention.minutes" in values for values in configs.values())


def test_incremental_subtract_and_validate_only() -> None:
    services = _services()
    _incremental(services, 1, [(TOPIC, "t", [("cleanup.policy", 0, "compact,delete")])])
    resp = _incremental(services, 1, [(TOPIC, "t", [("cleanup.policy", 3, "delete")])], validate_only=True)
    assert resp.responses[0].error_code == ErrorCode.none
    assert services.metadata.image.topic_config("t")["cleanup.policy"] == "compact,delete"
    _incremental(services, 1, [(TOPIC, "t", [("cleanup.policy", 3, "delete")])])
    assert services.metadata.image.topic_config("t")["cleanup.policy"] == "compact"


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_alter_configs_replaces_the_set(version: int) -> None:
    services = _services()
    res = (
        request_entity(
            33, version, "AlterConfigsResource", resource_type=TOPIC, resource_name="t",
            configs=(request_entity(33, version, "AlterableConfig", name="segment.ms", value="7000"),),
        ),
        request_entity(
            33, version, "AlterConfigsResource", resource_type=TOPIC, resource_name="t2",
            configs=(),
        ),
        request_entity(
            33, version, "AlterConfigsResource", resource_type=TOPIC, resource_name="t",
            configs=(request_entity(33, version, "AlterableConfig", name="bogus", value="1"),),
        ),
    )
    resp = call(services, 33, version, {"resources": res, "validate_only": False})
    assert [r.error_code for r in resp.responses] == [
        ErrorCode.none,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.invalid_config,
    ]
    assert dict(services.metadata.image.topic_config("t")) == {"segment.ms": "7000"}


def test_incremental_subtract_to_an_empty_list_is_stored_empty_as_kafka_does() -> None:
    """Kafka's ConfigurationControlManager joins what is left (""), and `cleanup.policy`'s
    ValidList allows an empty list: neither delete nor compact."""
    services = _services()
    resp = _incremental(services, 1, [(TOPIC, "t", [("cleanup.policy", 3, "delete")])])
    assert resp.responses[0].error_code == ErrorCode.none
    assert services.metadata.image.topic_config("t")["cleanup.policy"] == ""
    (entry,) = _describe(services, 4, [(TOPIC, "t", ("cleanup.policy",))]).results[0].configs
    assert (entry.value, entry.config_source) == ("", 1)  # DYNAMIC_TOPIC_CONFIG
    resp = _incremental(services, 1, [(TOPIC, "t", [("cleanup.policy", 3, "compact")])])  # already empty
    assert resp.responses[0].error_code == ErrorCode.none
    assert services.metadata.image.topic_config("t")["cleanup.policy"] == ""


@pytest.mark.parametrize("resource_name", ["1", ""])
def test_a_broker_config_kmirror_does_not_define_is_stored_and_described(resource_name: str) -> None:
    services = _services()
    name = "sasl.kerberos.min.time.before.relogin"
    resp = _incremental(services, 1, [(BROKER, resource_name, [(name, 0, "120000")])])
    assert resp.responses[0].error_code == ErrorCode.none
    (entry,) = _describe(services, 4, [(BROKER, resource_name, (name,))]).results[0].configs
    assert entry.value == "120000" and entry.read_only is False
    assert entry.config_source == (2 if resource_name else 3)  # DYNAMIC_BROKER / DYNAMIC_DEFAULT_BROKER
    everything = {c.name for c in _describe(services, 4, [(BROKER, resource_name, None)]).results[0].configs}
    assert name in everything
    # a kmirror key that is not dynamic is still refused, as Kafka refuses it
    resp = _incremental(services, 1, [(BROKER, resource_name, [("log.dirs", 0, "/elsewhere")])])
    assert resp.responses[0].error_code == ErrorCode.invalid_request


GROUP = 32


def test_group_configs_are_described_and_altered_as_kafka_does() -> None:
    services = _services()
    described = {c.name: c for c in _describe(services, 4, [(GROUP, "g", None)]).results[0].configs}
    assert set(described) == {"consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "share.session.timeout.ms",
                              "share.heartbeat.interval.ms", "share.record.lock.duration.ms", "share.auto.offset.reset",
                              "share.isolation.level"}
    assert (described["consumer.session.timeout.ms"].value, described["consumer.session.timeout.ms"].config_source) == (
        "45000", 5)  # DEFAULT_CONFIG
    resp = _incremental(services, 1, [(GROUP, "g", [("consumer.session.timeout.ms", 0, "50000"),
                                                    ("share.auto.offset.reset", 0, "earliest")])])
    assert resp.responses[0].error_code == ErrorCode.none
    described = {c.name: c for c in _describe(services, 4, [(GROUP, "g", None)]).results[0].configs}
    assert (described["consumer.session.timeout.ms"].value, described["consumer.session.timeout.ms"].config_source) == (
        "50000", 8)  # GROUP_CONFIG
    assert described["share.auto.offset.reset"].value == "earliest"
    refusals = [
        ([("consumer.session.timeout.ms", 0, "70000")], "must be less than or equal to group.consumer.max.session.timeout.ms"),
        ([("consumer.heartbeat.interval.ms", 0, "1000")], "must be greater than or equal to group.consumer.min.heartbeat"),
        ([("no.such.group.config", 0, "1")], "Unknown group config name: no.such.group.config"),
        ([("share.auto.offset.reset", 0, "middle")], "share.auto.offset.reset"),
        ([("consumer.session.timeout.ms", 2, "1")], "consumer.session.timeout.ms"),  # APPEND: not a list
    ]
    for ops, message in refusals:
        response = _incremental(services, 1, [(GROUP, "g", ops)]).responses[0]
        assert response.error_code == ErrorCode.invalid_config and message in (response.error_message or ""), ops
    resp = _incremental(services, 1, [(GROUP, "g", [("consumer.session.timeout.ms", 1, None)])])  # DELETE
    assert resp.responses[0].error_code == ErrorCode.none
    (entry,) = _describe(services, 4, [(GROUP, "g", ("consumer.session.timeout.ms",))]).results[0].configs
    assert (entry.value, entry.config_source) == ("45000", 5)


def test_group_configs_are_bounded_by_the_controllers_group_consumer_bounds() -> None:
    services = _services(**{"group.consumer.max.session.timeout.ms": "120000",
                            "group.consumer.min.heartbeat.interval.ms": "1000"})
    resp = _incremental(services, 1, [(GROUP, "g", [("consumer.session.timeout.ms", 0, "90000"),
                                                    ("consumer.heartbeat.interval.ms", 0, "2000")])])
    assert resp.responses[0].error_code == ErrorCode.none
    response = _incremental(services, 1, [(GROUP, "g", [("consumer.session.timeout.ms", 0, "130000")])]).responses[0]
    assert response.error_code == ErrorCode.invalid_config
    assert "must be less than or equal to group.consumer.max.session.timeout.ms" in response.error_message


def test_producer_id_expiration_is_a_dynamic_broker_config_of_at_least_one_ms() -> None:
    services = _services()
    name = "producer.id.expiration.ms"
    for bad in ("0", "-5", "soon"):
        resp = _incremental(services, 1, [(BROKER, "", [(name, 0, bad)])])
        assert resp.responses[0].error_code == ErrorCode.invalid_config
    resp = _incremental(services, 1, [(BROKER, "", [(name, 0, "60000")])])
    assert resp.responses[0].error_code == ErrorCode.none
    (entry,) = _describe(services, 4, [(BROKER, "1", (name,))]).results[0].configs
    assert (entry.value, entry.config_source, entry.read_only) == ("60000", 3, False)  # DYNAMIC_DEFAULT_BROKER
    resp = _incremental(services, 1, [(BROKER, "", [("producer.id.expiration.check.interval.ms", 0, "10")])])
    assert resp.responses[0].error_code == ErrorCode.invalid_request  # static, as in Kafka
