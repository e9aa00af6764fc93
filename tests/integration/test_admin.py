"""The admin APIs through real clients: configs, ACLs, partitions, offsets, records deletion,
log dirs, groups, cluster description."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)

from kmirror.testing.kafka_clients import create_topic, group_consume, produce_acked
from kmirror.testing.processes import LocalCluster

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(module_node: LocalCluster) -> LocalCluster:
    """The module's tests share one node, each with its own topics; only one of them makes
    ACLs, only the other groups."""
    return module_node


def test_configs_acls_partitions_offsets_and_deletion(cluster):
    b = cluster.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    create_topic(b, "adm", partitions=2, config={"retention.ms": "3600000"})

    # DescribeConfigs / IncrementalAlterConfigs
    res = ConfigResource(ResourceType.TOPIC, "adm")
    configs = admin.describe_configs([res])[res].result(30)
    assert configs["retention.ms"].value == "3600000"
    assert configs["cleanup.policy"].value == "delete"
    change = ConfigResource(
        ResourceType.TOPIC, "adm",
        incremental_configs=[ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([change])[change].result(30)
    assert admin.describe_configs([res])[res].result(30)["max.message.bytes"].value == "2000"
    broker = ConfigResource(ResourceType.BROKER, "1")
    assert admin.describe_configs([broker])[broker].result(30)["num.partitions"].value == "1"

    # CreateAcls / DescribeAcls / DeleteAcls
    acl = AclBinding(ResourceType.TOPIC, "adm", ResourcePatternType.LITERAL, "User:alice", "*",
                     AclOperation.READ, AclPermissionType.ALLOW)
    admin.create_acls([acl])[acl].result(30)
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(flt).result(30) == [acl]
    deleted = admin.delete_acls([flt])[flt].result(30)
    assert deleted == [acl]
    assert admin.describe_acls(flt).result(30) == []

    # CreatePartitions
    from confluent_kafka.admin import NewPartitions

    admin.create_partitions([NewPartitions("adm", 4)])["adm"].result(30)
    assert len(admin.list_topics("adm", timeout=10).topics["adm"].partitions) == 4

    # ListOffsets, DeleteRecords
    produce_acked(b, "adm", 20, 1)
    tp = TopicPartition("adm", 0)
    latest = admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(30)
    assert latest.offset == 20
    deleted_to = admin.delete_records([TopicPartition("adm", 0, 5)])
    low = list(deleted_to.values())[0].result(30)
    assert low.low_watermark == 5
    earliest = admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(30)
    assert earliest.offset == 5

    # DescribeCluster
    desc = admin.describe_cluster().result(30)
    assert [n.id for n in desc.nodes] == [1]
    assert desc.controller.id == 1


def test_groups_and_log_dirs_with_kafka_python(cluster):
    from kafka import KafkaAdminClient

    b = cluster.bootstrap
    create_topic(b, "ld", partitions=1)
    produce_acked(b, "ld", 10, 1)
    assert len(group_consume(b, "ldg", "ld", 10)) == 10
    admin = KafkaAdminClient(bootstrap_servers=b)
    try:
        assert [g["group_id"] for g in admin.list_groups()] == ["ldg"]
        offsets = admin.list_group_offsets("ldg")["ldg"]
        assert {(tp.topic, tp.partition): om.offset for tp, om in offsets.items()} == {("ld", 0): 10}
        (broker,) = admin.describe_log_dirs()
        (log_dir,) = broker["log_dirs"]
        assert log_dir["log_dir"].endswith("node-1/data")
        sizes = {t["name"]: [p["partition_size"] for p in t["partitions"]] for t in log_dir["topics"]}
        assert sizes["ld"][0] > 0 and len(sizes["__consumer_offsets"]) == 50
        assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0
        admin.delete_groups(["ldg"])
        assert admin.list_groups() == []
    finally:
        admin.close()
