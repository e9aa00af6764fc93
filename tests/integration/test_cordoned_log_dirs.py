"""Cordoned log directories (KIP-1066) on real processes: a broker whose directories are all
cordoned (`cordoned.log.dirs`, set with confluent-kafka's AdminClient as kafka-configs.sh sets
it) keeps its replicas but gets no new partitions from the controller until it is uncordoned;
in a node with two log directories, new partitions go to the one not cordoned, and
kafka-python's DescribeLogDirs (v5) says which is cordoned. A value naming a directory the
broker does not have is refused with Kafka's message, and so is a cluster-wide default."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration


def set_cordoned(admin: AdminClient, broker: str, value: str | None) -> None:
    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource(ResourceType.BROKER, broker, incremental_configs=[
        ConfigEntry("cordoned.log.dirs", value or "", incremental_operation=op)])
    admin.incremental_alter_configs([resource])[resource].result(30)


def placement_error(admin: AdminClient, replication_factor: int) -> str:
    """The refusal of a topic that needs `replication_factor` usable brokers ("" if accepted)."""
    future = admin.create_topics([NewTopic("probe", 1, replication_factor)], validate_only=True)["probe"]
    try:
        future.result(30)
    except KafkaException as e:
        return str(e.args[0].str())
    return ""


def replicas_of(admin: AdminClient, topic: str) -> set[int]:
    md = admin.list_topics(topic, timeout=10).topics[topic]
    return {r for p in md.partitions.values() for r in p.replicas}


def test_a_cordoned_broker_gets_no_new_partitions_until_uncordoned(tmp_path: Path) -> None:
    with LocalCluster(dir=tmp_path / "c3", port=free_port_block(3), nodes=3) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        create_topic(c.bootstrap, "before", partitions=6, replication_factor=3)
        assert placement_error(admin, 3) == ""

        set_cordoned(admin, "3", "*")
        refusal = wait_until(lambda: placement_error(admin, 3), "the controller to leave broker 3 out")
        assert refusal == ("Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot "
                           "be reached because only 2 broker(s) are registered or some brokers have all their log "
                           "directories cordoned.")
        create_topic(c.bootstrap, "while-cordoned", partitions=6, replication_factor=2)
        assert replicas_of(admin, "while-cordoned") == {1, 2}
        assert replicas_of(admin, "before") == {1, 2, 3}  # its replicas stay and serve

        described = admin.describe_configs([ConfigResource(ResourceType.BROKER, "3")])
        entry = next(iter(described.values())).result(30)["cordoned.log.dirs"]
        assert entry.value == "*" and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value

        set_cordoned(admin, "3", None)
        wait_until(lambda: placement_error(admin, 3) == "", "broker 3 to take partitions again")
        create_topic(c.bootstrap, "after", partitions=6, replication_factor=2)
        assert 3 in replicas_of(admin, "after")


def test_new_partitions_go_to_the_directory_not_cordoned(tmp_path: Path) -> None:
    from kafka import KafkaAdminClient

    node_dir = tmp_path / "one" / "node-1"
    first, second = str(node_dir / "data"), str(node_dir / "data2")
    with LocalCluster(dir=tmp_path / "one", port=free_port_block(), overrides={"log.dirs": f"{first},{second}"}) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap})
        wrong = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry("cordoned.log.dirs", "/not/a/log/dir", incremental_operation=AlterConfigOpType.SET)])
        with pytest.raises(KafkaException, match="All entries in cordoned.log.dirs must be present in log.dirs or "
                                                 "log.dir. Missing entries : /not/a/log/dir"):
            admin.incremental_alter_configs([wrong])[wrong].result(30)
        everyone = kmirror("configs", "--bootstrap-server", c.bootstrap, "--entity-type", "brokers",
                           "--entity-default", "--alter", "--add-config", "cordoned.log.dirs=*", check=False)
        assert everyone.returncode != 0
        assert "Cannot update these configs at default cluster level, broker id must be specified" in everyone.stderr

        set_cordoned(admin, "1", second)
        create_topic(c.bootstrap, "placed", partitions=8)
        assert sorted(p.name for p in Path(first).glob("placed-*")) == [f"placed-{i}" for i in range(8)]
        assert not list(Path(second).glob("placed-*"))

        kafka_python = KafkaAdminClient(bootstrap_servers=c.bootstrap)
        try:
            (broker,) = kafka_python.describe_log_dirs()
            assert {d["log_dir"]: d["is_cordoned"] for d in broker["log_dirs"]} == {first: False, second: True}
        finally:
            kafka_python.close()

        set_cordoned(admin, "1", "*")  # the only broker, wholly cordoned: no new topic has a place
        refusal = wait_until(lambda: placement_error(admin, 1), "the controller to leave broker 1 out")
        assert refusal == ("Unable to replicate the partition 1 time(s): All brokers are currently fenced, or have "
                           "all their log directories cordoned.")
