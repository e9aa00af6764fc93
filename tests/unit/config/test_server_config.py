from pathlib import Path

import pytest

from kmirror.config import ConfigError, Listener, ServerConfig
from kmirror.config.properties import parse_properties

STOCK = """\
# Kafka 4 server.properties, trimmed
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def test_stock_kafka_server_properties_load(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(STOCK)
    cfg = ServerConfig.load(path)
    assert cfg.node_id == 1
    assert cfg.process_roles == ("broker", "controller")
    assert cfg.listeners == (Listener("PLAINTEXT", "", 9092), Listener("CONTROLLER", "", 9093))
    assert cfg.advertised_listener() == Listener("PLAINTEXT", "localhost", 9092)
    assert cfg.controller_listener_names == ("CONTROLLER",)
    assert cfg.controller_quorum_bootstrap_servers == (("localhost", 9093),)
    assert cfg.log_dirs == ["/tmp/kraft-combined-logs"]
    assert cfg.log_retention_ms == 168 * 3_600_000
    assert cfg.inter_broker_listener_name == "PLAINTEXT"
    assert cfg.raw["num.io.threads"] == "8"


def test_defaults_match_kafka() -> None:
    cfg = ServerConfig.from_properties({"node.id": "3"})
    assert cfg.num_partitions == 1
    assert cfg.default_replication_factor == 1
    assert cfg.auto_create_topics_enable is True
    assert cfg.delete_topic_enable is True
    assert cfg.message_max_bytes == 1048588
    assert cfg.offsets_topic_num_partitions == 50
    assert cfg.offsets_topic_replication_factor == 1
    assert cfg.group_initial_rebalance_delay_ms == 3000
    assert cfg.group_min_session_timeout_ms == 6000
    assert cfg.group_max_session_timeout_ms == 1800000
    assert cfg.socket_request_max_bytes == 104857600
    assert cfg.replica_lag_time_max_ms == 30000
    assert cfg.log_dirs == ["/tmp/kafka-logs"]
    assert cfg.metrics_port == 0
    assert cfg.log_roll_ms == 168 * 3_600_000
    assert cfg.advertised_listener() == Listener("PLAINTEXT", "", 9092)


def test_retention_precedence_ms_over_minutes_over_hours() -> None:
    assert ServerConfig.from_properties({"node.id": "1", "log.retention.minutes": "2"}).log_retention_ms == 120_000
    cfg = ServerConfig.from_properties(
        {"node.id": "1", "log.retention.minutes": "2", "log.retention.ms": "5", "log.retention.hours": "1"}
    )
    assert cfg.log_retention_ms == 5
    assert ServerConfig.from_properties({"node.id": "1", "log.retention.ms": "-1"}).log_retention_ms == -1


def test_log_dir_fallback_and_voters() -> None:
    cfg = ServerConfig.from_properties(
        {"node.id": "1", "log.dir": "/data/k", "controller.quorum.voters": "1@127.0.0.1:9093,2@[::1]:9094",
         "process.roles": "controller", "listeners": "CONTROLLER://127.0.0.1:9093",
         "controller.listener.names": "CONTROLLER"}
    )
    assert cfg.log_dirs == ["/data/k"]
    assert [(v.node_id, v.host, v.port) for v in cfg.controller_quorum_voters] == [(1, "127.0.0.1", 9093), (2, "::1", 9094)]
    # a combined broker and controller may be one voter of several (Kafka's combined mode)
    combined = ServerConfig.from_properties({"node.id": "2", "controller.quorum.voters": "1@127.0.0.1:9093,2@[::1]:9094"})
    assert combined.is_broker and combined.is_controller and len(combined.controller_quorum_voters) == 2


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"node.id": "1", "log.dirz": "/x"}, "unknown configuration 'log.dirz'"),
        ({"node.id": "1", "num.partitions": "abc"}, "invalid value 'abc' for 'num.partitions': expected an integer"),
        ({"node.id": "1", "num.partitions": "0"}, "invalid value '0' for 'num.partitions': expected a value >= 1"),
        ({"node.id": "1", "delete.topic.enable": "yes"}, "invalid value 'yes' for 'delete.topic.enable': expected true or false"),
        ({}, "missing required configuration 'node.id'"),
        ({"node.id": "3", "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094"},
         "invalid value for 'controller.quorum.voters': node.id 3 is not among them"),
        ({"node.id": "3", "process.roles": "controller", "listeners": "CONTROLLER://127.0.0.1:9093",
          "controller.listener.names": "CONTROLLER", "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094"},
         "invalid value for 'controller.quorum.voters': node.id 3 is not among them"),
        ({"node.id": "1", "listeners": "PLAINTEXT//x:1"}, "expected NAME://host:port"),
        ({"node.id": "1", "listeners": "SSL://x:1"}, "only PEM is supported (set ssl.keystore.type=PEM)"),
        ({"node.id": "1", "listeners": "X://x:1", "listener.security.protocol.map": "X:KERBEROS"},
         "security protocol KERBEROS is not supported"),
        ({"node.id": "1", "listeners": "FOO://x:1"}, "not in listener.security.protocol.map"),
        ({"node.id": "1", "controller.quorum.voters": "x@h:1"}, "expected id@host:port"),
        ({"node.id": "1", "log.cleanup.policy": "delete,zap"}, "'log.cleanup.policy'"),
        ({"node.id": "1", "process.roles": "broker,pilot"}, "'process.roles'"),
        ({"node.id": "1", "metrics.port": "70000"}, "'metrics.port'"),
        ({"node.id": "1", "offsets.retention.minutes": "0"},
         "invalid value '0' for 'offsets.retention.minutes': expected a value >= 1"),
        ({"node.id": "1", "offsets.retention.minutes": "-5"}, "'offsets.retention.minutes'"),
        ({"node.id": "1", "offsets.retention.check.interval.ms": "0"}, "'offsets.retention.check.interval.ms'"),
    ],
)
def test_config_errors_are_one_line_and_name_the_key(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        ServerConfig.from_properties(props)
    text = str(info.value)
    assert message in text
    assert "\n" not in text


def test_properties_syntax() -> None:
    text = (
        "# comment\n"
        "! another\n"
        "a=1\n"
        "b : two words \n"
        "c   three\n"
        "long = first,\\\n"
        "       second\n"
        "esc\\=key=tab\\there\\u0041\n"
        "empty=\n"
        "a=override\n"
    )
    assert parse_properties(text) == {
        "a": "override",
        "b": "two words ",
        "c": "three",
        "long": "first,second",
        "esc=key": "tab\thereA",
        "empty": "",
    }


def test_even_backslashes_do_not_continue() -> None:
    assert parse_properties("a=x\\\\\nb=y\n") == {"a": "x\\", "b": "y"}
