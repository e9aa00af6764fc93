"""OffsetCommit and OffsetFetch v10 on a real node: topics named by id (Kafka 4.1, the
versions Kafka 4.2's consumers use). Offsets committed by id read back by name through
confluent-kafka (v9 and below, by name), and the other way round; an id the cluster does not
know is UNKNOWN_TOPIC_ID."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from kmirror.client.connection import BrokerConnection
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.kafka_clients import committed, create_topic
from kmirror.testing.processes import LocalCluster, free_port_block
from kmirror.testing.replication import request_type

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(dir=tmp_path_factory.mktemp("offsets-by-id"), port=free_port_block()) as c:
        yield c


async def _topic_id(conn: BrokerConnection, topic: str) -> uuid.UUID:
    M = request_type(3, 12)
    response = await conn.send(build(M, topics=(nested(M, "MetadataRequestTopic")(topic_id=None, name=topic),),
                                     allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    assert response.topics[0].error_code == ErrorCode.none
    return response.topics[0].topic_id


async def _coordinator_ready(conn: BrokerConnection, group: str) -> None:
    """FindCoordinator until the group's coordinator serves (`__consumer_offsets` is created
    on first use and its partitions loaded)."""
    for _ in range(150):
        found = await conn.send(build(request_type(10, 3), key=group, key_type=0))
        if found.error_code == ErrorCode.none:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"no coordinator for {group}: {found}")


async def _commit(conn: BrokerConnection, group: str, topic_id: uuid.UUID, offsets: dict[int, int]) -> list[Any]:
    R = request_type(8, 10)
    response = await conn.send(build(R, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                     group_instance_id=None, topics=(nested(R, "OffsetCommitRequestTopic")(
                                         topic_id=topic_id, partitions=tuple(
                                             nested(R, "OffsetCommitRequestPartition")(
                                                 partition_index=p, committed_offset=o, committed_metadata="by id")
                                             for p, o in offsets.items())),)))
    return list(response.topics)


async def _fetch(conn: BrokerConnection, group: str, topics: dict[uuid.UUID, list[int]] | None) -> Any:
    R = request_type(9, 10)
    asked = None if topics is None else tuple(
        nested(R, "OffsetFetchRequestTopics")(topic_id=t, partition_indexes=tuple(ps)) for t, ps in topics.items())
    response = await conn.send(build(R, groups=(nested(R, "OffsetFetchRequestGroup")(group_id=group, topics=asked),)))
    return response.groups[0]


def _offsets(group_response: Any) -> dict[tuple[uuid.UUID, int], tuple[int, int]]:
    """(topic id, partition) -> (committed offset, error code)."""
    return {(t.topic_id, p.partition_index): (p.committed_offset, int(p.error_code))
            for t in group_response.topics for p in t.partitions}


def test_offsets_committed_and_fetched_by_topic_id_are_the_offsets_of_that_topic(node: LocalCluster) -> None:
    topic, group = f"ids-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topic(node.bootstrap, topic, partitions=2)
    stranger = uuid.uuid4()

    async def commit_and_fetch() -> tuple[uuid.UUID, list[Any], Any, Any]:
        conn = BrokerConnection("127.0.0.1", node.port, client_id="offsets-by-id")
        await conn.connect()
        try:
            topic_id = await _topic_id(conn, topic)
            await _coordinator_ready(conn, group)
            topics = await _commit(conn, group, topic_id, {0: 7, 1: 11})
            topics += await _commit(conn, group, stranger, {0: 1})
            by_id = await _fetch(conn, group, {topic_id: [0, 1, 2], stranger: [0]})
            every = await _fetch(conn, group, None)
            return topic_id, topics, by_id, every
        finally:
            await conn.close()

    topic_id, commits, by_id, every = asyncio.run(commit_and_fetch())
    # the response names topics by id too
    assert [(t.topic_id, [(p.partition_index, int(p.error_code)) for p in t.partitions]) for t in commits] == [
        (topic_id, [(0, ErrorCode.none), (1, ErrorCode.none)]), (stranger, [(0, ErrorCode.unknown_topic_id)])]
    assert by_id.error_code == ErrorCode.none
    assert _offsets(by_id) == {(topic_id, 0): (7, 0), (topic_id, 1): (11, 0), (topic_id, 2): (-1, 0),
                               (stranger, 0): (-1, ErrorCode.unknown_topic_id)}
    assert _offsets(every) == {(topic_id, 0): (7, 0), (topic_id, 1): (11, 0)}
    # a client of the versions by name reads what was committed by id
    assert committed(node.bootstrap, group, topic, 2) == {0: 7, 1: 11}


def test_offsets_committed_by_name_are_fetched_by_topic_id(node: LocalCluster) -> None:
    topic, group = f"names-{uuid.uuid4().hex[:6]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topic(node.bootstrap, topic)
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 42)], asynchronous=False)
    finally:
        consumer.close()

    async def fetch() -> tuple[uuid.UUID, Any]:
        conn = BrokerConnection("127.0.0.1", node.port, client_id="offsets-by-id")
        await conn.connect()
        try:
            topic_id = await _topic_id(conn, topic)
            return topic_id, await _fetch(conn, group, {topic_id: [0]})
        finally:
            await conn.close()

    topic_id, fetched = asyncio.run(fetch())
    assert _offsets(fetched) == {(topic_id, 0): (42, 0)}
    assert fetched.topics[0].partitions[0].metadata == ""
