import pytest

from kmirror.config.definitions import LONG_MAX, ConfigError
from kmirror.config.mirror import (
    DEFAULT_TOPIC_PROPERTIES_EXCLUDE,
    AclRule,
    InvalidMirrorConfig,
    MirrorBrokerConfig,
    MirrorConfig,
    parse_mirror_config,
)


def ok(configs) -> MirrorConfig:
    result = parse_mirror_config(configs)
    assert isinstance(result, MirrorConfig), result
    return result


def test_defaults():
    config = ok({"bootstrap.servers": "localhost:9091, localhost:9092"})
    assert config.bootstrap_servers == ("localhost:9091", "localhost:9092")
    assert config.topic_properties_exclude == DEFAULT_TOPIC_PROPERTIES_EXCLUDE
    assert config.groups_include == (".*",)
    assert config.acl_include == (AclRule(),)
    assert config.source_connection == {"bootstrap.servers": "localhost:9091, localhost:9092"}


def test_source_connection_gets_security_sasl_ssl_only():
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'
    config = ok({"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
                 "sasl.jaas.config": jaas, "ssl.truststore.location": "/t", "mirror.groups.include": "app-.*"})
    assert config.source_connection == {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL",
                                        "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas,
                                        "ssl.truststore.location": "/t"}
    assert config.source_security.sasl.username == "u" and config.source_security.tls.ca_location == "/t"


@pytest.mark.parametrize(("configs", "why"), [
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "'sasl.jaas.config' is required"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "AWS_MSK_IAM", "sasl.jaas.config": "x required;"},
     "sasl.mechanism"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": "x required;"},
     "GSSAPI needs com.sun.security.auth.module.Krb5LoginModule"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": "x required;"},
     "SCRAM-SHA-512 needs org.apache.kafka.common.security.scram.ScramLoginModule"),
    ({"security.protocol": "SSL", "ssl.truststore.type": "JKS"}, "only PEM"),
])
def test_unusable_source_security_is_invalid(configs, why):
    result = parse_mirror_config({"bootstrap.servers": "h:1", **configs})
    assert isinstance(result, InvalidMirrorConfig) and why in result.message


@pytest.mark.parametrize(("configs", "why"), [
    ({}, "bootstrap.servers"),
    ({"bootstrap.servers": " "}, "bootstrap.servers"),
    ({"bootstrap.servers": "nohost"}, "Invalid url"),
    ({"bootstrap.servers": "h:99999"}, "Invalid url"),
    ({"bootstrap.servers": "h:1", "security.protocol": "TLS"}, "security.protocol"),
    ({"bootstrap.servers": "h:1", "retention.ms": "1"}, "Unknown"),
    ({"bootstrap.servers": "h:1", "mirror.groups.include": "("}, "Invalid regex"),
    ({"bootstrap.servers": "h:1", "mirror.acl.include": "a;b;c;d;e;f"}, "mirror.acl.include"),
    ({"bootstrap.servers": "h:1", "mirror.acl.include": "TOPIC;("}, "mirror.acl.include"),
])
def test_invalid(configs, why):
    result = parse_mirror_config(configs)
    assert isinstance(result, InvalidMirrorConfig) and why in result.message


def test_topic_properties_exclusion():
    default = ok({"bootstrap.servers": "h:1"})
    source = {"retention.ms": "1", "min.insync.replicas": "2", "mirror.name": "x",
              "leader.replication.throttled.replicas": "*", "cleanup.policy": "compact"}
    assert default.topic_configs_to_copy(source) == {"retention.ms": "1", "cleanup.policy": "compact"}
    throttles = ok({"bootstrap.servers": "h:1", "mirror.topic.properties.exclude": ".*throttled.*"})
    assert throttles.topic_configs_to_copy(source) == {"retention.ms": "1", "min.insync.replicas": "2",
                                                       "cleanup.policy": "compact"}  # mirror.name always out
    nothing = ok({"bootstrap.servers": "h:1", "mirror.topic.properties.exclude": ""})
    assert nothing.is_topic_property_excluded("mirror.name")
    assert not nothing.is_topic_property_excluded("min.insync.replicas")


def test_groups_include():
    config = ok({"bootstrap.servers": "h:1", "mirror.groups.include": "app-.*,service-.*"})
    assert config.is_group_included("app-1") and config.is_group_included("service-x")
    assert not config.is_group_included("other") and not config.is_group_included("my-app-1")


def test_acl_include_kip_examples():
    every = ok({"bootstrap.servers": "h:1"})
    assert every.is_acl_included("GROUP", "g", "READ", "ALLOW", "User:x")
    rules = ok({"bootstrap.servers": "h:1", "mirror.acl.include": "TOPIC;orders.*,*;*;*;*;User:alice"})
    assert rules.is_acl_included("TOPIC", "orders-eu", "WRITE", "DENY", "User:bob")
    assert rules.is_acl_included("GROUP", "g", "READ", "ALLOW", "User:alice")
    assert not rules.is_acl_included("TOPIC", "payments", "READ", "ALLOW", "User:bob")
    group = AclRule.parse("GROUP;consumer-.*;READ;ALLOW;User:bob")
    assert group.matches("group", "consumer-1", "read", "allow", "User:bob")
    assert not group.matches("GROUP", "consumer-1", "READ", "ALLOW", "User:bobby")
    assert not group.matches("GROUP", "consumer-1", "WRITE", "ALLOW", "User:bob")
    assert AclRule.parse("TOPIC;*;READ;ALLOW").matches("TOPIC", "t", "READ", "ALLOW", "User:any")


def test_broker_config_defaults_and_parsing():
    assert MirrorBrokerConfig.from_properties({}) == MirrorBrokerConfig(50, 3, 1, 30000, LONG_MAX)
    parsed = MirrorBrokerConfig.from_properties({"mirror.topic.num.partitions": "3",
                                                 "mirror.num.replica.fetchers": "4"})
    assert (parsed.mirror_topic_num_partitions, parsed.mirror_num_replica_fetchers) == (3, 4)
    with pytest.raises(ConfigError, match="mirror.topic.num.partitions"):
        MirrorBrokerConfig.from_properties({"mirror.topic.num.partitions": "0"})
