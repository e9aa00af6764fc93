"""IncrementalAlterConfigs and DescribeConfigs on KIP-1279's MIRROR config resource (64)."""

from kio.schema.errors import ErrorCode

from kmirror.config.topic import ConfigSource
from kmirror.metadata.config_description import describe_configs
from kmirror.metadata.controller.configs import (
    AlterableConfig,
    AlterConfigOp,
    alter_configs,
    incremental_alter_configs,
)
from kmirror.metadata.controller.mirrors import (
    SOURCE_CLUSTER_ID_KEY,
    FeatureUpdate,
    create_mirror,
    set_source_cluster_id,
    update_features,
)
from kmirror.metadata.image import ConfigResource
from kmirror.metadata.mirrors import mirror
from kmirror.testing.metadata import image_with_brokers, server_config

M = ConfigResource(64, "m")
SET, DELETE, APPEND, SUBTRACT = AlterConfigOp.SET, AlterConfigOp.DELETE, AlterConfigOp.APPEND, AlterConfigOp.SUBTRACT


def _apply(image, result):
    records = result if isinstance(result, list) else result.records
    return image.apply(records, image.offset + len(records))


def _image(enabled=True, **configs):
    image = image_with_brokers(1)
    if enabled:
        image = _apply(image, update_features(image, [FeatureUpdate("mirror.version", 1)], {"mirror.version": (0, 1)}))
    image = _apply(image, create_mirror(image, "m", {"bootstrap.servers": "a:9092", **configs}))
    return _apply(image, set_source_cluster_id(image, "m", "src-id"))


def _alter(image, *ops, resource=M, validate_only=False):
    result = incremental_alter_configs(image, [(resource, [AlterableConfig(*op) for op in ops])],
                                       validate_only=validate_only)
    (answer,) = result.response
    return answer.error, result.records


def test_set_replaces_the_bootstrap_servers_and_keeps_the_internal_keys():
    image = _image()
    error, records = _alter(image, ("bootstrap.servers", SET, "b:9093,c:9094"))
    assert error.code == ErrorCode.none
    assert [(r.resource_type, r.resource_name, r.name, r.value) for r in records] == [
        (64, "m", "bootstrap.servers", "b:9093,c:9094")]
    after = _apply(image, _alter(image, ("bootstrap.servers", SET, "b:9093,c:9094"))[1])
    info = mirror(after, "m")
    assert info.source_bootstrap == "b:9093,c:9094" and info.source_cluster_id == "src-id"


def test_validate_only_and_unchanged_values_write_nothing():
    image = _image()
    assert _alter(image, ("bootstrap.servers", SET, "b:1"), validate_only=True) == (_alter(image)[0], [])
    assert _alter(image, ("bootstrap.servers", SET, "a:9092"))[1] == []


def test_invalid_alters_are_refused_as_create_mirror_refuses_them_and_change_nothing():
    image = _image()
    cases = [
        (("unknown.key", SET, "x"), ErrorCode.invalid_config, "unknown.key"),
        ((SOURCE_CLUSTER_ID_KEY, SET, "x"), ErrorCode.invalid_config, SOURCE_CLUSTER_ID_KEY),
        ((SOURCE_CLUSTER_ID_KEY, DELETE, None), ErrorCode.invalid_config, SOURCE_CLUSTER_ID_KEY),
        (("bootstrap.servers", SET, "no-port"), ErrorCode.invalid_config, "no-port"),
        (("bootstrap.servers", SET, "h:99999"), ErrorCode.invalid_config, "h:99999"),
        (("bootstrap.servers", DELETE, None), ErrorCode.invalid_config, "bootstrap.servers"),
        (("security.protocol", SET, "BOGUS"), ErrorCode.invalid_config, "security.protocol"),
        (("security.protocol", SET, "SASL_PLAINTEXT"), ErrorCode.invalid_config, "source connection"),
        (("mirror.groups.include", SET, "(["), ErrorCode.invalid_config, "mirror.groups.include"),
        (("security.protocol", APPEND, "SSL"), ErrorCode.invalid_config, "append"),
        (("bootstrap.servers", SET, None), ErrorCode.invalid_request, "Null"),
    ]
    for op, code, text in cases:
        error, records = _alter(image, op)
        assert (error.code, records) == (code, []), op
        assert text in error.message, (op, error.message)


def test_append_and_subtract_apply_to_list_configs_from_their_default():
    image = _image()
    error, records = _alter(image, ("mirror.groups.include", APPEND, "app-.*"), ("bootstrap.servers", APPEND, "b:2"))
    assert error.code == ErrorCode.none
    assert {r.name: r.value for r in records} == {"mirror.groups.include": ".*,app-.*", "bootstrap.servers": "a:9092,b:2"}
    image = _apply(image, _alter(image, ("bootstrap.servers", APPEND, "b:2"))[1])
    error, records = _alter(image, ("bootstrap.servers", SUBTRACT, "a:9092"))
    assert {r.name: r.value for r in records} == {"bootstrap.servers": "b:2"}
    assert _alter(image, ("bootstrap.servers", SUBTRACT, "a:9092,b:2"))[0].code == ErrorCode.invalid_config


def test_delete_removes_an_optional_key_with_a_tombstone():
    image = _image(**{"mirror.groups.include": "g.*"})
    error, records = _alter(image, ("mirror.groups.include", DELETE, None))
    assert error.code == ErrorCode.none
    assert [(r.name, r.value) for r in records] == [("mirror.groups.include", None)]


def test_missing_mirror_and_disabled_mirroring():
    image = _image()
    error, _ = _alter(image, ("bootstrap.servers", SET, "b:1"), resource=ConfigResource(64, "other"))
    assert error.code == ErrorCode.resource_not_found and "other" in error.message
    disabled = _image(enabled=False)
    assert _alter(disabled, ("bootstrap.servers", SET, "b:1"))[0].code == ErrorCode.unsupported_version
    assert describe_configs(disabled, server_config(), M, None).error.code == ErrorCode.unsupported_version


def test_legacy_alter_configs_refuses_the_mirror_resource():
    result = alter_configs(_image(), [(M, {"bootstrap.servers": "b:1"})])
    assert result.response[0].error.code == ErrorCode.invalid_request and result.records == []


def test_inline_pem_certificates_are_described_as_secrets_as_kafka_types_them():
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"
    image = _image(**{"security.protocol": "SSL", "ssl.truststore.certificates": pem,
                      "ssl.keystore.certificate.chain": pem, "ssl.keystore.key": pem})
    got = {c.name: (c.value, c.is_sensitive) for c in describe_configs(image, server_config(), M, None).configs}
    assert got["ssl.truststore.certificates"] == (None, True)
    assert got["ssl.keystore.certificate.chain"] == (None, True)


def test_describe_lists_set_configs_then_kip_defaults_and_hides_secrets_and_internal_keys():
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'
    image = _image(**{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas})
    described = describe_configs(image, server_config(), M, None)
    assert described.error.code == ErrorCode.none
    got = {c.name: (c.value, c.source, c.is_sensitive) for c in described.configs}
    assert got == {
        "bootstrap.servers": ("a:9092", ConfigSource.UNKNOWN, False),
        "security.protocol": ("SASL_PLAINTEXT", ConfigSource.UNKNOWN, False),
        "sasl.mechanism": ("PLAIN", ConfigSource.UNKNOWN, False),
        "sasl.jaas.config": (None, ConfigSource.UNKNOWN, True),
        "mirror.groups.include": (".*", ConfigSource.DEFAULT_CONFIG, False),
        "mirror.acl.include": ("*", ConfigSource.DEFAULT_CONFIG, False),
        "mirror.topics.include": ("", ConfigSource.DEFAULT_CONFIG, False),
        "mirror.topic.properties.exclude": (got["mirror.topic.properties.exclude"][0], ConfigSource.DEFAULT_CONFIG,
                                            False),
    }
    assert "min.insync.replicas" in got["mirror.topic.properties.exclude"][0]
    only = describe_configs(image, server_config(), M, ["bootstrap.servers", "nope"])
    assert [c.name for c in only.configs] == ["bootstrap.servers"]
    missing = describe_configs(image, server_config(), ConfigResource(64, "other"), None)
    assert missing.error.code == ErrorCode.resource_not_found
