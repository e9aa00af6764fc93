"""Authorization of Metadata and of the admin APIs served from the metadata image, with the
authorizer on (Kafka's KafkaApis rules)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.acls import AclOperation as Op
from kmirror.metadata.controller.acls import ResourceType as Res
from kmirror.metadata.controller.topics import CreatableTopic
from kmirror.testing.authorization import CLUSTER_LISTENER, enable_authorizer, grant
from kmirror.testing.metadata import call, metadata_services, request_entity

DENIED = ErrorCode.topic_authorization_failed
NO_OPS = {"include_topic_authorized_operations": False, "include_cluster_authorized_operations": False}


def services() -> Any:
    s = metadata_services()
    asyncio.run(s.metadata.create_topics([CreatableTopic("orders", 1, 1), CreatableTopic("payments", 1, 1)]))
    return enable_authorizer(s)


def metadata(s: Any, *names: str | uuid.UUID | None, auto: bool = False, principal: str = "alice") -> Any:
    topics = None if names == (None,) else tuple(
        request_entity(3, 12, "MetadataRequestTopic", name=n if isinstance(n, str) else None,
                       topic_id=n if isinstance(n, uuid.UUID) else uuid.UUID(int=0)) for n in names)
    return call(s, 3, 12, {"topics": topics, "allow_auto_topic_creation": auto, **NO_OPS}, principal=principal)


def test_listing_all_topics_lists_only_describable_ones() -> None:
    s = services()
    assert metadata(s, None).topics == ()
    grant(s, Res.TOPIC, "orders", Op.WRITE)  # WRITE implies DESCRIBE
    assert [t.name for t in metadata(s, None).topics] == ["orders"]
    assert [t.name for t in metadata(s, None, principal="admin").topics] == ["orders", "payments"]
    assert [t.name for t in call(s, 3, 12, {"topics": None, **NO_OPS}, listener=CLUSTER_LISTENER).topics] == [
        "orders", "payments"]


def test_named_topics_without_describe_are_refused_and_ids_not_revealed() -> None:
    s = services()
    grant(s, Res.TOPIC, "orders", Op.DESCRIBE)
    resp = metadata(s, "orders", "payments", "missing")
    assert [(t.name, t.error_code) for t in resp.topics] == [
        ("orders", ErrorCode.none), ("payments", DENIED), ("missing", DENIED)]
    assert resp.topics[1].partitions == ()
    payments_id = s.metadata.image.topics["payments"].topic_id
    (by_id,) = metadata(s, payments_id).topics
    assert by_id.error_code == ErrorCode.unknown_topic_id and by_id.topic_id == payments_id


def test_auto_creation_needs_create() -> None:
    s = services()
    grant(s, Res.TOPIC, "*", Op.DESCRIBE)
    assert metadata(s, "fresh", auto=True).topics[0].error_code == DENIED
    assert "fresh" not in s.metadata.image.topics
    grant(s, Res.TOPIC, "fre", Op.CREATE, pattern=4)
    assert metadata(s, "fresh", auto=True).topics[0].error_code == ErrorCode.leader_not_available
    assert "fresh" in s.metadata.image.topics
    grant(s, Res.CLUSTER, "kafka-cluster", Op.CREATE, principal="User:bob")
    grant(s, Res.TOPIC, "*", Op.DESCRIBE, principal="User:bob")
    assert metadata(s, "other", auto=True, principal="bob").topics[0].error_code == ErrorCode.leader_not_available


def creatable(name: str) -> Any:
    return request_entity(19, 7, "CreatableTopic", name=name, num_partitions=1, replication_factor=1, assignments=(),
                          configs=())


def test_create_topics_needs_create_on_the_cluster_or_the_topic() -> None:
    s = services()
    grant(s, Res.TOPIC, "new-", Op.CREATE, pattern=4)
    resp = call(s, 19, 7, {"topics": (creatable("new-a"), creatable("other")), "timeout": 1000,
                           "validate_only": False}, principal="alice")
    assert {t.name: t.error_code for t in resp.topics} == {"new-a": ErrorCode.none, "other": DENIED}
    (created,) = [t for t in resp.topics if t.name == "new-a"]  # no DESCRIBE_CONFIGS on it: no configs
    assert (created.configs, created.topic_config_error_code, created.num_partitions) == ((), DENIED, 1)
    grant(s, Res.TOPIC, "new-", Op.DESCRIBE_CONFIGS, pattern=4)
    resp = call(s, 19, 7, {"topics": (creatable("new-b"),), "timeout": 1000, "validate_only": False},
                principal="alice")
    assert resp.topics[0].topic_config_error_code == ErrorCode.none and resp.topics[0].configs
    assert "new-a" in s.metadata.image.topics and "other" not in s.metadata.image.topics
    grant(s, Res.CLUSTER, "kafka-cluster", Op.CREATE)
    resp = call(s, 19, 7, {"topics": (creatable("other"),), "timeout": 1000, "validate_only": False},
                principal="alice")
    assert resp.topics[0].error_code == ErrorCode.none


def test_delete_topics_and_create_partitions_per_topic() -> None:
    s = services()
    grant(s, Res.TOPIC, "orders", Op.DELETE, Op.ALTER)
    parts = tuple(request_entity(37, 3, "CreatePartitionsTopic", name=n, count=2, assignments=None)
                  for n in ("orders", "payments"))
    resp = call(s, 37, 3, {"topics": parts, "timeout": 1000, "validate_only": False}, principal="alice")
    assert {r.name: r.error_code for r in resp.results} == {"orders": ErrorCode.none, "payments": DENIED}
    resp = call(s, 20, 5, {"topic_names": ("orders", "payments"), "timeout": 1000}, principal="alice")
    assert {r.name: r.error_code for r in resp.responses} == {"orders": ErrorCode.none, "payments": DENIED}
    assert sorted(s.metadata.image.topics) == ["payments"]
    payments_id = s.metadata.image.topics["payments"].topic_id
    by_id = request_entity(20, 6, "DeleteTopicState", name=None, topic_id=payments_id)
    (hidden,) = call(s, 20, 6, {"topics": (by_id,), "timeout": 1000}, principal="alice").responses
    assert hidden.error_code == ErrorCode.unknown_topic_id


def acl_creation(name: str) -> Any:
    return request_entity(30, 3, "AclCreation", resource_type=2, resource_name=name, resource_pattern_type=3,
                          principal="User:bob", host="*", operation=3, permission_type=3)


def test_acl_apis_need_describe_or_alter_on_the_cluster() -> None:
    s = services()
    refused = call(s, 30, 3, {"creations": (acl_creation("x"), acl_creation("y"))}, principal="alice")
    assert [r.error_code for r in refused.results] == [ErrorCode.cluster_authorization_failed] * 2
    filters = {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
               "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    assert call(s, 29, 3, filters, principal="alice").error_code == ErrorCode.cluster_authorization_failed
    deleted = call(s, 31, 3, {"filters": (request_entity(31, 3, "DeleteAclsFilter", **filters),)}, principal="alice")
    assert deleted.filter_results[0].error_code == ErrorCode.cluster_authorization_failed
    assert s.metadata.image.acls == {}
    grant(s, Res.CLUSTER, "kafka-cluster", Op.ALTER)  # ALTER implies DESCRIBE
    assert [r.error_code for r in call(s, 30, 3, {"creations": (acl_creation("x"),)}, principal="alice").results] == [0]
    described = call(s, 29, 3, filters, principal="alice")
    assert described.error_code == 0 and len(described.resources) == 2
    # CLUSTER_MIRROR bindings are accepted
    mirror_acl = request_entity(30, 3, "AclCreation", resource_type=8, resource_name="m1", resource_pattern_type=3,
                                principal="User:bob", host="*", operation=8, permission_type=3)
    assert call(s, 30, 3, {"creations": (mirror_acl,)}, principal="admin").results[0].error_code == 0


def describe_configs(s: Any, *resources: tuple[int, str], principal: str = "alice") -> dict[str, int]:
    res = tuple(request_entity(32, 4, "DescribeConfigsResource", resource_type=t, resource_name=n,
                               configuration_keys=None) for t, n in resources)
    resp = call(s, 32, 4, {"resources": res, "include_synonyms": False, "include_documentation": False},
                principal=principal)
    return {r.resource_name: int(r.error_code) for r in resp.results}


def test_describe_configs_per_resource() -> None:
    s = services()
    grant(s, Res.TOPIC, "orders", Op.ALTER_CONFIGS)  # implies DESCRIBE_CONFIGS
    grant(s, Res.GROUP, "g", Op.DESCRIBE_CONFIGS)
    assert describe_configs(s, (2, "orders"), (2, "payments"), (4, "1"), (32, "g")) == {
        "orders": 0, "payments": DENIED, "1": ErrorCode.cluster_authorization_failed, "g": 0}
    grant(s, Res.CLUSTER, "kafka-cluster", Op.DESCRIBE_CONFIGS)
    assert describe_configs(s, (4, "1")) == {"1": 0}


def test_incremental_alter_configs_per_resource_and_mirrors() -> None:
    s = services()
    grant(s, Res.TOPIC, "orders", Op.ALTER_CONFIGS)

    def alter(*resources: tuple[int, str, str]) -> dict[str, int]:
        res = tuple(request_entity(44, 1, "AlterConfigsResource", resource_type=t, resource_name=n, configs=(
            request_entity(44, 1, "AlterableConfig", name=k, config_operation=0, value="1000"),))
            for t, n, k in resources)
        resp = call(s, 44, 1, {"resources": res, "validate_only": False}, principal="alice")
        return {r.resource_name: int(r.error_code) for r in resp.responses}

    assert alter((2, "orders", "retention.ms"), (2, "payments", "retention.ms"), (64, "m1", "x")) == {
        "orders": 0, "payments": DENIED, "m1": ErrorCode.cluster_authorization_failed}  # the KIP's "mirror operation"
    assert s.metadata.image.topic_config("orders").get("retention.ms") == "1000"
    assert s.metadata.image.topic_config("payments").get("retention.ms") is None


def test_cluster_apis_refused_before_their_handler() -> None:
    s = services()
    resp = call(s, 46, 0, {"timeout": 1000, "topics": None}, principal="alice")
    assert resp.error_code == ErrorCode.cluster_authorization_failed
    elect = request_entity(43, 2, "TopicPartitions", topic="orders", partitions=(0,))
    resp = call(s, 43, 2, {"election_type": 0, "topic_partitions": (elect,), "timeout": 1000}, principal="alice")
    assert resp.error_code == ErrorCode.cluster_authorization_failed
    assert resp.replica_election_results[0].partition_result[0].error_code == ErrorCode.cluster_authorization_failed
    assert call(s, 46, 0, {"timeout": 1000, "topics": None}, principal="admin").error_code == ErrorCode.none


def test_authorized_operations_are_the_principals() -> None:
    s = services()
    grant(s, Res.TOPIC, "orders", Op.READ)
    grant(s, Res.CLUSTER, "kafka-cluster", Op.DESCRIBE)
    topic = request_entity(3, 12, "MetadataRequestTopic", name="orders", topic_id=uuid.UUID(int=0))
    fields = {"topics": (topic,), "allow_auto_topic_creation": False, "include_topic_authorized_operations": True,
              "include_cluster_authorized_operations": True}
    resp = call(s, 3, 10, fields, principal="alice")
    # READ, and DESCRIBE which READ implies
    assert resp.topics[0].topic_authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert resp.cluster_authorized_operations == 1 << Op.DESCRIBE
    everything = call(s, 3, 10, fields, principal="admin")
    assert everything.topics[0].topic_authorized_operations == sum(
        1 << op for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.DESCRIBE_CONFIGS,
                           Op.ALTER_CONFIGS))
    cluster = call(s, 60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1}, principal="alice")
    assert cluster.cluster_authorized_operations == 1 << Op.DESCRIBE


def test_client_quotas_and_scram_credentials_need_the_cluster() -> None:
    s = services()
    entity = request_entity(49, 1, "EntityData", entity_type="user", entity_name="bob")
    op = request_entity(49, 1, "OpData", key="producer_byte_rate", value=1024.0, remove=False)
    entry = request_entity(49, 1, "EntryData", entity=(entity,), ops=(op,))
    resp = call(s, 49, 1, {"entries": (entry,), "validate_only": False}, principal="alice")
    assert resp.entries[0].error_code == ErrorCode.cluster_authorization_failed
    assert call(s, 48, 1, {"components": (), "strict": False}, principal="alice").error_code == \
        ErrorCode.cluster_authorization_failed
    grant(s, Res.CLUSTER, "kafka-cluster", Op.ALTER_CONFIGS)  # implies DESCRIBE_CONFIGS
    assert call(s, 49, 1, {"entries": (entry,), "validate_only": False}, principal="alice").entries[0].error_code == 0
    assert call(s, 48, 1, {"components": (), "strict": False}, principal="alice").error_code == 0
    deletion = request_entity(51, 0, "ScramCredentialDeletion", name="bob", mechanism=1)
    resp = call(s, 51, 0, {"deletions": (deletion,), "upsertions": ()}, principal="alice")
    assert [(r.user, r.error_code) for r in resp.results] == [("bob", ErrorCode.cluster_authorization_failed)]
    resp = call(s, 51, 0, {"deletions": (deletion,), "upsertions": ()}, principal="admin")
    assert resp.results[0].error_code == ErrorCode.resource_not_found
