import asyncio
import uuid

import pytest
from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.topics import CreatableTopic
from kmirror.testing.metadata import call, metadata_services, request_entity, server_config


def _creatable(version: int, name: str, partitions: int = 1, rf: int = 1, configs: dict | None = None,
               assignments: dict | None = None):
    cfgs = tuple(request_entity(19, version, "CreatableTopicConfig", name=k, value=v) for k, v in (configs or {}).items())
    assigns = tuple(
        request_entity(19, version, "CreatableReplicaAssignment", partition_index=p, broker_ids=tuple(b))
        for p, b in (assignments or {}).items()
    )
    return request_entity(19, version, "CreatableTopic", name=name, num_partitions=partitions,
                          replication_factor=rf, assignments=assigns, configs=cfgs)


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics_every_version(version: int) -> None:
    services = metadata_services()
    topics = (
        _creatable(version, "a", 2, 1, {"retention.ms": "1000"}),
        _creatable(version, "b", -1, -1, assignments={0: [1]}),
        _creatable(version, "bad!", 1, 1),
        _creatable(version, "c", 1, 3),
    )
    resp = call(services, 19, version, {"topics": topics, "timeout": 1000, "validate_only": False})
    codes = {t.name: t.error_code for t in resp.topics}
    assert codes == {
        "a": ErrorCode.none,
        "b": ErrorCode.none,
        "bad!": ErrorCode.invalid_topic_exception,
        "c": ErrorCode.invalid_replication_factor,
    }
    image = services.metadata.image
    assert set(image.topics) == {"a", "b"}
    a = resp.topics[0]
    assert a.error_message is None
    if version >= 5:
        assert (a.num_partitions, a.replication_factor) == (2, 1)
        configs = {c.name: (c.value, c.config_source) for c in a.configs}
        assert configs["retention.ms"] == ("1000", 1)  # DYNAMIC_TOPIC_CONFIG
        assert configs["cleanup.policy"] == ("delete", 5)  # DEFAULT_CONFIG
        assert resp.topics[3].num_partitions == -1
    if version >= 7:
        assert a.topic_id == image.topics["a"].topic_id
    assert resp.topics[3].error_message


def test_create_topics_validate_only_and_duplicates() -> None:
    services = metadata_services()
    topics = (_creatable(7, "a"), _creatable(7, "dup"), _creatable(7, "dup"))
    resp = call(services, 19, 7, {"topics": topics, "timeout": 1000, "validate_only": True})
    assert [(t.name, t.error_code) for t in resp.topics] == [
        ("a", ErrorCode.none),
        ("dup", ErrorCode.invalid_request),
    ]
    assert services.metadata.image.topics == {}


def test_create_existing_topic() -> None:
    services = metadata_services()
    call(services, 19, 7, {"topics": (_creatable(7, "a"),), "timeout": 1000, "validate_only": False})
    resp = call(services, 19, 7, {"topics": (_creatable(7, "a"),), "timeout": 1000, "validate_only": False})
    assert resp.topics[0].error_code == ErrorCode.topic_already_exists


def _with_topics(*names: str, **cfg: str):
    services = metadata_services(server_config(**cfg))
    asyncio.run(services.metadata.create_topics([CreatableTopic(n, 1, 1) for n in names]))
    return services


@pytest.mark.parametrize("version", range(1, 6))
def test_delete_topics_by_name(version: int) -> None:
    services = _with_topics("a", "b")
    resp = call(services, 20, version, {"topic_names": ("a", "zz", "a"), "timeout": 1000})
    assert [(r.name, r.error_code) for r in resp.responses] == [
        ("a", ErrorCode.none),
        ("zz", ErrorCode.unknown_topic_or_partition),
    ]
    assert set(services.metadata.image.topics) == {"b"}


def test_delete_topics_v6_by_name_and_id() -> None:
    services = _with_topics("a", "b")
    a_id = services.metadata.image.topics["a"].topic_id
    b_id = services.metadata.image.topics["b"].topic_id
    topics = (
        request_entity(20, 6, "DeleteTopicState", name="a", topic_id=uuid.UUID(int=0)),
        request_entity(20, 6, "DeleteTopicState", name=None, topic_id=b_id),
        request_entity(20, 6, "DeleteTopicState", name=None, topic_id=uuid.UUID(int=42)),
    )
    resp = call(services, 20, 6, {"topics": topics, "timeout": 1000})
    assert [(r.name, r.topic_id, r.error_code) for r in resp.responses] == [
        ("a", a_id, ErrorCode.none),
        ("b", b_id, ErrorCode.none),
        (None, uuid.UUID(int=42), ErrorCode.unknown_topic_id),
    ]
    assert services.metadata.image.topics == {}


def test_delete_disabled() -> None:
    services = _with_topics("a", delete_topic_enable="false")
    resp = call(services, 20, 6, {"topics": (request_entity(20, 6, "DeleteTopicState", name="a", topic_id=uuid.UUID(int=0)),),
                                  "timeout": 1000})
    assert resp.responses[0].error_code == ErrorCode.topic_deletion_disabled
    assert "a" in services.metadata.image.topics


@pytest.mark.parametrize("version", range(0, 4))
def test_create_partitions(version: int) -> None:
    services = _with_topics("a", "b")
    topics = (
        request_entity(37, version, "CreatePartitionsTopic", name="a", count=3, assignments=None),
        request_entity(37, version, "CreatePartitionsTopic", name="b", count=1, assignments=None),
        request_entity(37, version, "CreatePartitionsTopic", name="zz", count=2, assignments=None),
        request_entity(
            37, version, "CreatePartitionsTopic", name="c", count=2,
            assignments=(request_entity(37, version, "CreatePartitionsAssignment", broker_ids=(1,)),),
        ),
    )
    resp = call(services, 37, version, {"topics": topics, "timeout": 1000, "validate_only": False})
    assert [(r.name, r.error_code) for r in resp.results] == [
        ("a", ErrorCode.none),
        ("b", ErrorCode.invalid_partitions),
        ("zz", ErrorCode.unknown_topic_or_partition),
        ("c", ErrorCode.unknown_topic_or_partition),
    ]
    assert resp.results[0].error_message is None and resp.results[1].error_message
    assert len(services.metadata.image.topics["a"].partitions) == 3
