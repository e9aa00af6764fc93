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
