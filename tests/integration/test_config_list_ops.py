"""Config changes through confluent-kafka's AdminClient, answered as Kafka's
controller answers them: a SUBTRACT that empties `cleanup.policy` succeeds and stores the
empty list (neither delete nor compact), and an APPEND brings a policy back; a Kafka broker
config kmirror does not act on is stored and described back."""

from __future__ import annotations

import subprocess

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from kmirror.testing.kafka_clients import create_topic, produce_acked
from kmirror.testing.processes import LocalCluster, kmirror

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(module_node: LocalCluster) -> LocalCluster:
    """The module's tests share one node: each uses its own topics, groups and configs."""
    return module_node


def _alter(admin: AdminClient, topic: str, op: AlterConfigOpType, value: str) -> None:
    change = ConfigResource(ResourceType.TOPIC, topic,
                            incremental_configs=[ConfigEntry("cleanup.policy", value, incremental_operation=op)])
    admin.incremental_alter_configs([change])[change].result(30)


def test_subtract_empties_cleanup_policy(cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    create_topic(cluster.bootstrap, "policy", config={"cleanup.policy": "delete"})
    resource = ConfigResource(ResourceType.TOPIC, "policy")
    _alter(admin, "policy", AlterConfigOpType.SUBTRACT, "delete")
    entry = admin.describe_configs([resource])[resource].result(30)["cleanup.policy"]
    assert (entry.value, entry.source) == ("", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert len(produce_acked(cluster.bootstrap, "policy", 3, 1)) == 3  # the topic keeps serving
    _alter(admin, "policy", AlterConfigOpType.APPEND, "compact")
    assert admin.describe_configs([resource])[resource].result(30)["cleanup.policy"].value == "compact"


def test_a_kafka_broker_config_kmirror_does_not_act_on_is_stored(cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    name = "sasl.kerberos.min.time.before.relogin"
    broker = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry(name, "120000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([broker])[broker].result(30)
    described = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
    entry = next(iter(described.values())).result(30)[name]
    assert (entry.value, entry.source) == ("120000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)


def test_group_configs_described_and_altered(cluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    group = ConfigResource(ResourceType.GROUP, "cfg-group", incremental_configs=[
        ConfigEntry("consumer.heartbeat.interval.ms", "6000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([group])[group].result(30)
    described = next(iter(admin.describe_configs([ConfigResource(ResourceType.GROUP, "cfg-group")]).values())).result(30)
    assert described["consumer.heartbeat.interval.ms"].value == "6000"
    assert described["consumer.session.timeout.ms"].value == "45000"
    too_long = ConfigResource(ResourceType.GROUP, "cfg-group", incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", "90000", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="group.consumer.max.session.timeout.ms"):
        admin.incremental_alter_configs([too_long])[too_long].result(30)


def test_group_configs_with_the_cli(cluster) -> None:
    def configs(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return kmirror("configs", "--bootstrap-server", cluster.bootstrap, "--entity-type", "groups",
                       "--entity-name", "cli-group", *args, check=check)

    assert configs("--alter", "--add-config", "consumer.session.timeout.ms=50000").stdout.strip() == (
        "Completed updating config for group cli-group.")
    described = configs("--describe").stdout.splitlines()
    assert described[0] == "Dynamic configs for group cli-group are:"
    assert [line.split()[0] for line in described[1:]] == ["consumer.session.timeout.ms=50000"]
    assert "consumer.heartbeat.interval.ms=5000" in configs("--describe", "--all").stdout
    refused = configs("--alter", "--add-config", "consumer.session.timeout.ms=90000", check=False)
    assert refused.returncode == 1 and "group.consumer.max.session.timeout.ms" in refused.stderr
