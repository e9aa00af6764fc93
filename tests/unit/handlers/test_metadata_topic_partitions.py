"""DescribeTopicPartitions (75) and ListConfigResources (74) over an in-memory image: the
page boundaries Kafka's handler draws, and the resource types of each version."""

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from kmirror.broker.handlers.describe_topic_partitions import page
from kmirror.metadata.controller.topics import CreatableTopic
from kmirror.testing.metadata import call, metadata_services, request_entity, server_config


@pytest.fixture
def services():
    svc = metadata_services(server_config(**{"max.request.partition.size.limit": "6"}))
    asyncio.run(svc.metadata.create_topics([CreatableTopic("a", 4, 1), CreatableTopic("b", 2, 1),
                                            CreatableTopic("c", 3, 1)]))
    return svc


def _describe(services, names, limit=2000, cursor=None):
    fields = {"topics": tuple(request_entity(75, 0, "TopicRequest", name=n) for n in names),
              "response_partition_limit": limit,
              "cursor": None if cursor is None else request_entity(75, 0, "Cursor", topic_name=cursor[0],
                                                                    partition_index=cursor[1])}
    resp = call(services, 75, 0, fields)
    cursor = None if resp.next_cursor is None else (resp.next_cursor.topic_name, resp.next_cursor.partition_index)
    return [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in resp.topics], cursor


def test_the_broker_limit_caps_the_request_limit(services) -> None:
    assert _describe(services, []) == ([("a", 0, [0, 1, 2, 3]), ("b", 0, [0, 1])], ("c", 0))
    assert _describe(services, [], cursor=("c", 0)) == ([("c", 0, [0, 1, 2])], None)


def test_a_page_ends_inside_a_topic_and_the_next_starts_there(services) -> None:
    assert _describe(services, ["c", "a"], limit=3) == ([("a", 0, [0, 1, 2])], ("a", 3))
    assert _describe(services, ["c", "a"], limit=3, cursor=("a", 3)) == ([("a", 0, [3]), ("c", 0, [0, 1])], ("c", 2))
    assert _describe(services, ["c", "a"], limit=3, cursor=("c", 2)) == ([("c", 0, [2])], None)


def test_unknown_and_invalid_names_cost_nothing_and_are_answered(services) -> None:
    topics, cursor = _describe(services, ["b", "aa", "bad/name"], limit=3)
    assert topics == [("aa", ErrorCode.unknown_topic_or_partition, []), ("b", 0, [0, 1]),
                      ("bad/name", ErrorCode.invalid_topic_exception, [])]
    assert cursor is None


def test_a_cursor_past_the_last_partition_and_a_cursor_outside_the_request(services) -> None:
    assert _describe(services, ["b"], cursor=("b", 7)) == ([("b", 0, [])], None)
    assert _describe(services, ["b"], cursor=("a", 0)) == ([("b", ErrorCode.invalid_request, [])], None)


def test_page_with_no_room_answers_nothing() -> None:
    from kmirror.metadata.image import EMPTY_IMAGE

    assert page(EMPTY_IMAGE, ["x"], ("", 0), 0).next_cursor == ("x", 0)
    assert page(EMPTY_IMAGE, ["x"], ("", 0), -1).next_cursor is None


def test_config_resources_by_version_and_type(services) -> None:
    def listing(version, types=()):
        resp = call(services, 74, version, {"resource_types": tuple(types)})
        return resp.error_code, [(getattr(r, "resource_type", 16), r.resource_name) for r in resp.config_resources]

    assert listing(0) == (ErrorCode.none, [])  # client metrics only: kmirror has none
    code, found = listing(1)
    assert code == ErrorCode.none and found == [(8, "1"), (4, "1"), (2, "a"), (2, "b"), (2, "c")]
    assert listing(1, [2, 2]) == (ErrorCode.none, [(2, "a"), (2, "b"), (2, "c")])
    assert listing(1, [2, 64]) == (ErrorCode.unsupported_version, [])
