import asyncio
import io
import uuid

import pytest
from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.topics import CreatableTopic
from kmirror.testing.metadata import call, metadata_services, request_entity, server_config

OMITTED = -2147483648


def _services(**cfg: str):
    svc = metadata_services(server_config(**cfg))
    asyncio.run(svc.metadata.create_topics([CreatableTopic("orders", 3, 1)]))
    return svc


def _topic_req(version: int, name: str | None, topic_id: uuid.UUID | None = None):
    fields = {"name": name}
    if version >= 10:
        fields["topic_id"] = topic_id or uuid.UUID(int=0)
    return request_entity(3, version, "MetadataRequestTopic", **fields)


@pytest.mark.parametrize("version", range(0, 14))
def test_every_version_describes_existing_topic(version: int) -> None:
    services = _services()
    fields = {"topics": (_topic_req(version, "orders"),), "include_topic_authorized_operations": False, "include_cluster_authorized_operations": False}
    resp = call(services, 3, version, fields)
    assert [b.node_id for b in resp.brokers] == [1]
    assert (resp.brokers[0].host, resp.brokers[0].port) == ("127.0.0.1", 9092)
    (topic,) = resp.topics
    assert topic.error_code == ErrorCode.none and topic.name == "orders"
    assert [p.partition_index for p in topic.partitions] == [0, 1, 2]
    assert all(p.leader_id == 1 and p.isr_nodes == (1,) for p in topic.partitions)
    if version >= 1:
        assert resp.controller_id == 1 and topic.is_internal is False
    if version >= 2:
        assert resp.cluster_id == services.metadata.image.cluster_id
    if version >= 7:
        assert topic.partitions[0].leader_epoch == 0
    if version >= 8:
        assert topic.topic_authorized_operations == OMITTED
    if version >= 10:
        assert topic.topic_id == services.metadata.image.topics["orders"].topic_id


@pytest.mark.parametrize("version", [0, 1, 4, 9, 12, 13])
def test_all_topics(version: int) -> None:
    services = _services()
    asyncio.run(services.metadata.create_topics([CreatableTopic("alpha", 1, 1)]))
    topics = () if version == 0 else None
    resp = call(services, 3, version, {"topics": topics, "include_topic_authorized_operations": False, "include_cluster_authorized_operations": False})
    assert [t.name for t in resp.topics] == ["alpha", "orders"]
    if version >= 1:
        assert call(services, 3, version, {"topics": (), "include_topic_authorized_operations": False, "include_cluster_authorized_operations": False}).topics == ()


def test_auto_create_unknown_topic() -> None:
    services = _services()
    req = {"topics": (_topic_req(12, "fresh"),), "allow_auto_topic_creation": True,
           "include_topic_authorized_operations": False, "include_cluster_authorized_operations": False}
    resp = call(services, 3, 12, req)
    assert resp.topics[0].error_code == ErrorCode.leader_not_available
    assert "fresh" in services.metadata.image.topics
    resp = call(services, 3, 12, req)
    assert resp.topics[0].error_code == ErrorCode.none and len(resp.topics[0].partitions) == 1


def test_no_auto_create_when_disallowed_by_request_or_config() -> None:
    services = _services()
    req = {"topics": (_topic_req(12, "fresh"),), "allow_auto_topic_creation": False,
           "include_topic_authorized_operations": False, "include_cluster_authorized_operations": False}
    assert call(services, 3, 12, req).topics[0].error_code == ErrorCode.unknown_topic_or_partition
    services = _services(auto_create_topics_enable="false")
    req["allow_auto_topic_creation"] = True
    assert call(services, 3, 12, req).topics[0].error_code == ErrorCode.unknown_topic_or_partition
    assert "fresh" not in services.metadata.image.topics


def test_invalid_name_and_unknown_id() -> None:
    services = _services()
    req = {"topics": (_topic_req(12, "bad name"), _topic_req(12, None, uuid.UUID(int=5))),
           "include_topic_authorized_operations": True, "include_cluster_authorized_operations": False}
    resp = call(services, 3, 12, req)
    assert [t.error_code for t in resp.topics] == [ErrorCode.invalid_topic_exception, ErrorCode.unknown_topic_id]


def test_lookup_by_topic_id_and_authorized_operations() -> None:
    services = _services()
    tid = services.metadata.image.topics["orders"].topic_id
    resp = call(services, 3, 12, {"topics": (_topic_req(12, None, tid),), "include_topic_authorized_operations": True, "include_cluster_authorized_operations": False})
    (topic,) = resp.topics
    assert topic.name == "orders" and topic.topic_authorized_operations != OMITTED
    assert topic.topic_authorized_operations & (1 << 3)  # READ


def test_consumer_offsets_is_internal_and_auto_created_with_offsets_settings() -> None:
    services = _services(offsets_topic_num_partitions="5")
    req = {"topics": (_topic_req(9, "__consumer_offsets"),), "include_topic_authorized_operations": False, "include_cluster_authorized_operations": False}
    call(services, 3, 9, req)
    image = services.metadata.image
    assert len(image.topics["__consumer_offsets"].partitions) == 5
    assert image.topic_config("__consumer_offsets")["cleanup.policy"] == "compact"
    (topic,) = call(services, 3, 9, req).topics
    assert topic.is_internal is True


def test_brokers_listed_for_the_request_listener_only() -> None:
    services = _services()
    resp = call(services, 3, 12, {"topics": None, "include_topic_authorized_operations": False, "include_cluster_authorized_operations": False}, listener="OTHER")
    # a listener the broker does not have falls back to its first endpoint
    assert [b.node_id for b in resp.brokers] == [1]


@pytest.mark.parametrize("version", range(0, 14))
def test_encoding_with_kept_topic_entries_is_kio_s_byte_for_byte(version: int) -> None:
    """The Metadata writer that keeps each topic entry's bytes (`protocol.item_cache`) writes
    what kio's generic writer writes, on a first answer and on a repeated one."""
    from kio.serial import entity_writer

    from kmirror.protocol import item_cache

    services = _services()
    asyncio.run(services.metadata.create_topics([CreatableTopic("alpha", 2, 1)]))
    fields = {"topics": () if version == 0 else None, "include_topic_authorized_operations": version >= 8,
              "include_cluster_authorized_operations": False}
    for _ in range(2):
        resp = call(services, 3, version, fields)
        expected, cached = io.BytesIO(), io.BytesIO()
        entity_writer(type(resp))(expected, resp)
        writer = item_cache.writer_for(type(resp))
        assert writer is not None
        writer(cached, resp)
        assert cached.getvalue() == expected.getvalue()
        assert [t.name for t in resp.topics] == ["alpha", "orders"]


def test_topic_entries_are_built_once_per_image() -> None:
    from kio.index import load_response_schema

    from kmirror.broker.handlers.metadata import _topic

    services = _services()
    rt = load_response_schema(3, 12)

    def entry() -> object:
        image = services.metadata.image
        return _topic(rt, image, image.topics["orders"], False)

    first = entry()
    assert entry() is first  # the same image: the entry (and so its bytes) reused
    asyncio.run(services.metadata.create_topics([CreatableTopic("other", 1, 1)]))  # a new image
    rebuilt = entry()
    assert rebuilt is not first and rebuilt == first
