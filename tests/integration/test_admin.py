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

from kmirror.protocol.errors import ErrorCode
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


def test_topic_partitions_page_by_page_and_config_resources_with_kafka_python(cluster):
    """DescribeTopicPartitions (KIP-966) pages through topics with its cursor, and answers each
    partition as Metadata does; ListConfigResources (KIP-1142) lists topics, brokers and the
    groups with a config."""
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource as KafkaConfigResource
    from kafka.admin import ConfigResourceType

    b = cluster.bootstrap
    create_topic(b, "page-a", partitions=5)
    create_topic(b, "page-b", partitions=3)
    admin = KafkaAdminClient(bootstrap_servers=b)
    try:
        asked = ["page-b", "page-a", "page-z-absent"]
        pages, cursor = [], None
        while True:
            answer = admin.describe_topic_partitions(asked, response_partition_limit=4, cursor=cursor)
            pages.append([(t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]])
                          for t in answer["topics"]])
            cursor = answer["next_cursor"]
            if cursor is None:
                break
        assert pages == [
            [("page-a", 0, [0, 1, 2, 3])],
            [("page-a", 0, [4]), ("page-b", 0, [0, 1, 2])],
            [("page-z-absent", ErrorCode.unknown_topic_or_partition, [])],
        ]
        whole = admin.describe_topic_partitions(["page-a"])["topics"][0]
        metadata = AdminClient({"bootstrap.servers": b}).list_topics("page-a", timeout=10).topics["page-a"]
        assert whole["topic_id"] is not None and not whole["is_internal"]
        assert {p["partition_index"]: (p["leader_id"], p["replica_nodes"], p["isr_nodes"]) for p in whole["partitions"]} \
            == {i: (p.leader, p.replicas, p.isrs) for i, p in metadata.partitions.items()}
        every = [t["name"] for t in admin.describe_topic_partitions([])["topics"]]
        assert every == sorted(every) and {"page-a", "page-b"} <= set(every)
        # a cursor on a topic the request does not name
        (refused,) = admin.describe_topic_partitions(["page-b"], cursor={"topic_name": "page-a", "partition_index": 0})[
            "topics"]
        assert refused["error_code"] == ErrorCode.invalid_request

        admin.alter_configs([KafkaConfigResource(ConfigResourceType.GROUP, "configured-group",
                                                 configs={"consumer.session.timeout.ms": "50000"})])
        listing = admin.list_config_resources()
        assert {"page-a", "page-b"} <= set(listing["topic"])
        assert listing["broker"] == ["1"] and listing["broker_logger"] == ["1"]
        assert listing["group"] == ["configured-group"]
        assert admin.list_config_resources(["GROUP"]) == {"group": ["configured-group"]}
    finally:
        admin.close()
