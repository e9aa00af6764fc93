"""Which of a handler's decisions are audit-logged as refusals (INFO): Kafka's KafkaApis asks
with logIfDenied=false where a denial only leaves something out or is a probe."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import pytest

from kmirror.broker.authorizer_audit import AUDIT_LOGGER
from kmirror.metadata.controller.acls import AclOperation as Op
from kmirror.metadata.controller.acls import ResourceType as Res
from kmirror.metadata.controller.topics import CreatableTopic
from kmirror.testing.authorization import enable_authorizer, grant
from kmirror.testing.metadata import call, metadata_services, request_entity

NO_OPS = {"include_topic_authorized_operations": False, "include_cluster_authorized_operations": False}


@pytest.fixture
def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The audit log's INFO lines (the node's level), as they come."""
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)

    class Lines(list[str]):
        def read(self) -> list[str]:
            lines = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER and r.levelno == logging.INFO]
            caplog.clear()
            return lines

    return Lines()


def services() -> Any:
    s = metadata_services()
    asyncio.run(s.metadata.create_topics([CreatableTopic("orders", 1, 1), CreatableTopic("payments", 1, 1)]))
    enable_authorizer(s)
    grant(s, Res.TOPIC, "orders", Op.DESCRIBE)
    return s


def metadata(s: Any, *names: str, auto: bool = False) -> Any:
    topics = None if not names else tuple(request_entity(3, 12, "MetadataRequestTopic", name=n, topic_id=uuid.UUID(int=0))
                                            for n in names)
    return call(s, 3, 12, {"topics": topics, "allow_auto_topic_creation": auto, **NO_OPS}, principal="alice")


def test_metadata_for_all_topics_refuses_nothing(refusals: Any) -> None:
    s = services()
    assert [t.name for t in metadata(s).topics] == ["orders"]
    assert refusals.read() == []
    metadata(s, "orders", "payments")
    assert refusals.read() == [
        "Principal = User:alice is Denied operation = DESCRIBE from host = 127.0.0.1 on resource = "
        "Topic:LITERAL:payments for request = Metadata with resourceRefCount = 1 based on rule DefaultDeny"]


def test_auto_creation_probes_the_cluster_then_refuses_the_topic(refusals: Any) -> None:
    s = services()
    grant(s, Res.TOPIC, "*", Op.DESCRIBE)
    metadata(s, "fresh", auto=True)
    (line,) = refusals.read()  # CREATE on the cluster is a probe; CREATE on the topic a refusal
    assert "Denied operation = CREATE" in line and "Topic:LITERAL:fresh for request = Metadata" in line


def test_create_topics_probes_the_cluster_and_hides_configs_silently(refusals: Any) -> None:
    s = services()
    grant(s, Res.TOPIC, "new-", Op.CREATE, pattern=4)
    topic = request_entity(19, 7, "CreatableTopic", name="new-a", num_partitions=1, replication_factor=1,
                           assignments=(), configs=())
    call(s, 19, 7, {"topics": (topic,), "timeout": 1000, "validate_only": False}, principal="alice")
    # no CREATE on the cluster (a probe) and no DESCRIBE_CONFIGS on the topic (its configs left out)
    assert refusals.read() == []
