import asyncio
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema

from kmirror.client.admin import ELECT_LEADERS, Admin, ElectionType
from kmirror.client.errors import KafkaError
from kmirror.protocol.entities import build, nested
from kmirror.types import TopicPartition


class FakeConnection:
    def __init__(self, version: int, response_fields: dict[str, Any]) -> None:
        self.version = version
        self.response_fields = response_fields
        self.sent: list[Any] = []

    def request_type(self, api_key: int) -> type[Any]:
        assert api_key == ELECT_LEADERS
        return load_request_schema(api_key, self.version)  # type: ignore[no-any-return]

    async def send(self, request: Any) -> Any:
        self.sent.append(request)
        return build(load_response_schema(ELECT_LEADERS, self.version), **self.response_fields)


class FakeCluster:
    def __init__(self, conn: FakeConnection) -> None:
        self.conn = conn

    async def controller_connection(self) -> FakeConnection:
        return self.conn


def response(version: int, results: dict[str, list[tuple[int, int, str | None]]], error_code: int = 0) -> dict[str, Any]:
    rt = load_response_schema(ELECT_LEADERS, version)
    Result, Partition = nested(rt, "ReplicaElectionResult"), nested(rt, "PartitionResult")
    return {
        "throttle_time": 0,
        "error_code": error_code,
        "replica_election_results": tuple(
            build(Result, topic=topic, partition_result=tuple(
                build(Partition, partition_id=p, error_code=code, error_message=msg) for p, code, msg in parts
            ))
            for topic, parts in results.items()
        ),
    }


def test_elect_leaders_request_and_results() -> None:
    conn = FakeConnection(2, response(2, {"a": [(0, 0, None), (1, 84, "not needed")], "b": [(0, 80, "nope")]}))
    admin = Admin(FakeCluster(conn), timeout_ms=5_000)  # type: ignore[arg-type]
    tps = [TopicPartition("b", 0), TopicPartition("a", 1), TopicPartition("a", 0)]
    out = asyncio.run(admin.elect_leaders(ElectionType.UNCLEAN, tps))
    request = conn.sent[0]
    assert request.election_type == 1
    assert [(t.topic, tuple(t.partitions)) for t in request.topic_partitions] == [("a", (0, 1)), ("b", (0,))]
    assert request.timeout.total_seconds() == 5
    assert out[TopicPartition("a", 0)] is None
    err = out[TopicPartition("a", 1)]
    assert err is not None and err.error_name == "ELECTION_NOT_NEEDED"
    err = out[TopicPartition("b", 0)]
    assert err is not None and str(err) == "b-0: PREFERRED_LEADER_NOT_AVAILABLE: nope"


def test_all_partitions_sends_null_and_top_level_error_raises() -> None:
    conn = FakeConnection(1, response(1, {}, error_code=31))
    admin = Admin(FakeCluster(conn))  # type: ignore[arg-type]
    with pytest.raises(KafkaError, match="CLUSTER_AUTHORIZATION_FAILED"):
        asyncio.run(admin.elect_leaders(ElectionType.PREFERRED, None))
    assert conn.sent[0].topic_partitions is None


def test_v0_cannot_ask_for_unclean_elections() -> None:
    conn = FakeConnection(0, response(0, {}))
    admin = Admin(FakeCluster(conn))  # type: ignore[arg-type]
    with pytest.raises(KafkaError, match="UNSUPPORTED_VERSION"):
        asyncio.run(admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("a", 0)]))
    out = asyncio.run(admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("a", 0)]))
    assert out == {}
