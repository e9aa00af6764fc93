"""Admin mirror methods against fake connections answering with the KIP-1279 entities."""

import asyncio
import datetime
import types
from collections.abc import Callable
from typing import Any

import pytest

from kmirror.client.admin import Admin
from kmirror.client.errors import KafkaConnectionError, KafkaError
from kmirror.client.mirrors import MirrorPartitionDescription
from kmirror.protocol.mirror import (
    add_topics_to_mirror,
    create_mirror,
    delete_mirror,
    describe_mirrors,
    list_mirrors,
    pause_mirror_topics,
    remove_topics_from_mirror,
)
from kmirror.protocol.mirror.registry import MIRROR_APIS, entity_types

ZERO = datetime.timedelta(0)
Handler = Callable[[Any], Any]


class FakeConnection:
    def __init__(self, handler: Handler, address: str = "b:1", keys: Any = MIRROR_APIS, down: bool = False) -> None:
        self.handler = handler
        self.address = address
        self.api_versions = {k: (0, 0) for k in keys}
        self.down = down
        self.sent: list[Any] = []

    def request_type(self, api_key: int) -> type[Any]:
        return entity_types(api_key)[0]

    async def send(self, request: Any) -> Any:
        if self.down:
            raise KafkaConnectionError(f"connection to {self.address} lost")
        self.sent.append(request)
        return self.handler(request)


class FakeCluster:
    def __init__(self, *conns: FakeConnection) -> None:
        self.conns = conns
        self.metadata = types.SimpleNamespace(brokers={i + 1: None for i in range(len(conns))})

    async def controller_connection(self) -> FakeConnection:
        return self.conns[0]

    async def any_connection(self) -> FakeConnection:
        return self.conns[0]

    async def connection(self, broker_id: int) -> FakeConnection:
        return self.conns[broker_id - 1]


def admin(*conns: FakeConnection) -> Admin:
    return Admin(FakeCluster(*conns))  # type: ignore[arg-type]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_create_mirror_sends_sorted_configs_and_raises_kip_errors() -> None:
    answers = iter([0, 136])

    def handler(req: Any) -> Any:
        return create_mirror.CreateMirrorResponse(throttle_time=ZERO, error_code=next(answers), error_message=None)

    conn = FakeConnection(handler)
    run(admin(conn).create_mirror("m", {"security.protocol": "PLAINTEXT", "bootstrap.servers": "s:9092"}))
    req = conn.sent[0]
    assert isinstance(req, create_mirror.CreateMirrorRequest) and req.mirror_name == "m"
    assert [(c.name, c.value) for c in req.config] == [("bootstrap.servers", "s:9092"),
                                                       ("security.protocol", "PLAINTEXT")]
    with pytest.raises(KafkaError) as info:
        run(admin(conn).create_mirror("m.paused", {}))
    assert info.value.error_name == "INVALID_MIRROR_NAME"
    assert str(info.value) == "mirror m.paused: INVALID_MIRROR_NAME: The mirror name does not meet the naming rules"


def test_broker_without_mirror_apis_answers_unsupported_version() -> None:
    conn = FakeConnection(lambda r: None, keys=())
    with pytest.raises(KafkaError, match="UNSUPPORTED_VERSION: b:1 does not support DeleteMirror"):
        run(admin(conn).delete_mirror("m"))


def test_delete_mirror_not_empty() -> None:
    conn = FakeConnection(lambda r: delete_mirror.DeleteMirrorResponse(
        throttle_time=ZERO, error_code=143, error_message="still has topics"))
    with pytest.raises(KafkaError, match="mirror m: MIRROR_NOT_EMPTY: still has topics"):
        run(admin(conn).delete_mirror("m"))
    assert conn.sent[0] == delete_mirror.DeleteMirrorRequest(mirror_name="m")


def _topics_handler(module: Any, response_name: str, codes: dict[str, int], top: int = 0) -> Handler:
    def handler(req: Any) -> Any:
        return getattr(module, response_name)(
            throttle_time=ZERO, error_code=top, mirror_name=req.mirror_name,
            topics=tuple(module.TopicResult(name=t.topic_name, error_code=codes.get(t.topic_name, 0))
                         for t in req.topics))
    return handler


def test_add_topics_per_topic_results() -> None:
    conn = FakeConnection(_topics_handler(add_topics_to_mirror, "AddTopicsToMirrorResponse", {"b": 138}))
    out = run(admin(conn).add_topics_to_mirror("m", ["b", "a", "a"]))
    assert out["a"] is None
    err = out["b"]
    assert err is not None and err.error_name == "TOPIC_ALREADY_IN_MIRROR"
    req = conn.sent[0]
    assert [(t.topic_name, t.topic_id) for t in req.topics] == [("a", None), ("b", None)]


def test_add_topics_sends_the_replication_factor_tagged_field() -> None:
    conn = FakeConnection(_topics_handler(add_topics_to_mirror, "AddTopicsToMirrorResponse", {}))
    assert run(admin(conn).add_topics_to_mirror("m", ["a"], replication_factor=3)) == {"a": None}
    run(admin(conn).add_topics_to_mirror("m", ["a"]))
    assert [r.replication_factor for r in conn.sent] == [3, -1]


def test_top_level_error_raises_for_topic_operations() -> None:
    conn = FakeConnection(_topics_handler(remove_topics_from_mirror, "RemoveTopicsFromMirrorResponse", {}, top=35))
    with pytest.raises(KafkaError, match="UNSUPPORTED_VERSION: Cluster mirroring is disabled"):
        run(admin(conn).remove_topics_from_mirror("m", ["a"]))


def test_pause_sends_pause_request() -> None:
    conn = FakeConnection(_topics_handler(pause_mirror_topics, "PauseMirrorTopicsResponse", {"a": 140}))
    out = run(admin(conn).pause_mirror_topics("m", ["a"]))
    assert isinstance(conn.sent[0], pause_mirror_topics.PauseMirrorTopicsRequest)
    assert out["a"] is not None and out["a"].error_name == "MIRROR_TOPIC_ALREADY_PAUSED"


def test_list_mirrors_sorted() -> None:
    L = list_mirrors
    conn = FakeConnection(lambda r: L.ListMirrorsResponse(throttle_time=ZERO, error_code=0, mirrors=(
        L.ListedMirror(mirror_name="z", source_bootstrap="s:1", source_cluster_id="c", topic_count=1),
        L.ListedMirror(mirror_name="a", source_bootstrap="s:2", topic_count=0),
    )))
    out = run(admin(conn).list_mirrors())
    assert [(m.name, m.source_bootstrap, m.source_cluster_id, m.topic_count) for m in out] == [
        ("a", "s:2", "", 0), ("z", "s:1", "c", 1)]


def _describe(parts: dict[tuple[str, str, int], tuple[int, int, str]], mirror_error: int = 0) -> Handler:
    D = describe_mirrors

    def handler(req: Any) -> Any:
        mirrors: dict[str, dict[str, list[Any]]] = {}
        for (m, t, p), (src, dst, state) in parts.items():
            mirrors.setdefault(m, {}).setdefault(t, []).append(D.PartitionDetail(
                partition_index=p, source_offset=src, destination_offset=dst,
                lag=-1 if src < 0 or dst < 0 else src - dst, state=state))
        return D.DescribeMirrorsResponse(throttle_time=ZERO, error_code=0, mirrors=tuple(
            D.DescribedMirror(error_code=mirror_error, mirror_name=m, topics=tuple(
                D.TopicPartitions(topic_name=t, partitions=tuple(ps)) for t, ps in ts.items()))
            for m, ts in mirrors.items()))
    return handler


def test_describe_fans_out_and_merges_by_partition() -> None:
    b1 = FakeConnection(_describe({("m", "foo", 0): (69, 66, "MIRRORING"), ("m", "foo", 1): (-1, 80, "MIRRORING")}))
    b2 = FakeConnection(_describe({("m", "foo", 1): (94, 84, "MIRRORING"), ("n", "baz", 0): (5, 5, "PAUSED")}))
    out = run(admin(b1, b2).describe_mirrors())
    assert out == [
        MirrorPartitionDescription("m", "foo", 0, 69, 66, 3, "MIRRORING", -1),
        MirrorPartitionDescription("m", "foo", 1, 94, 84, 10, "MIRRORING", -1),
        MirrorPartitionDescription("n", "baz", 0, 5, 5, 0, "PAUSED", -1),
    ]
    assert b1.sent[0].mirror_names == () and b2.sent[0].mirror_names == ()
    out = run(admin(b1, b2).describe_mirrors(["m"], topics="f.*"))
    assert b1.sent[1].mirror_names == ("m",)
    assert {d.topic for d in out} == {"foo"}
    assert run(admin(b1, b2).describe_mirrors(topics=["baz"]))[0].topic == "baz"


def test_describe_tolerates_a_down_broker_but_not_all() -> None:
    up = FakeConnection(_describe({("m", "t", 0): (1, 1, "MIRRORING")}))
    down = FakeConnection(_describe({}), address="b:2", down=True)
    assert len(run(admin(up, down).describe_mirrors())) == 1
    with pytest.raises(KafkaConnectionError, match="b:2 lost"):
        run(admin(down).describe_mirrors())


def test_describe_unknown_mirror_raises() -> None:
    conn = FakeConnection(_describe({("x", "t", 0): (1, 1, "MIRRORING")}, mirror_error=137))
    with pytest.raises(KafkaError, match="mirror x: UNKNOWN_MIRROR"):
        run(admin(conn).describe_mirrors(["x"]))
