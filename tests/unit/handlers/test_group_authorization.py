"""Authorization of the group APIs (Kafka's KafkaApis rules), through the registered handlers
(the per-API policy runs first), with the authorizer on."""

from __future__ import annotations

import asyncio
import datetime
import inspect
import io
import logging
from dataclasses import dataclass
from typing import Any

import pytest
from kio.serial import entity_writer

from kmirror.broker.api import RequestContext, load_handlers
from kmirror.broker.authorizer_audit import AUDIT_LOGGER
from kmirror.broker.services import BrokerServices
from kmirror.coordinator.config import CoordinatorConfig
from kmirror.coordinator.group.service import GroupCoordinatorService
from kmirror.metadata.controller.acls import AclOperation as Op
from kmirror.metadata.controller.acls import ResourceType as Res
from kmirror.metadata.image import AclBinding
from kmirror.ports import ManualClock
from kmirror.protocol.codec import RequestHeaderView
from kmirror.protocol.errors import ErrorCode as E
from kmirror.protocol.registry import kio_schemas
from kmirror.testing.authorization import binding, static_authorizer
from kmirror.testing.groups import MemoryCoordinatorLog

HANDLERS = {d.api_key: d.handler for d in load_handlers()}


@dataclass
class Listener:
    host: str
    port: int


class Config:
    def advertised_listener(self, name: str | None = None) -> Listener:
        return Listener("localhost", 9092)


class Metadata:
    image = None

    async def ensure_internal_topic(self, name: str, **kwargs: Any) -> None:
        pass


def call(services: BrokerServices, api_key: int, version: int, principal: str = "alice", **fields: Any) -> Any:
    request_type, response_type = kio_schemas(api_key)(version)
    ctx = RequestContext(RequestHeaderView(api_key, version, 1, "client"), response_type, "127.0.0.1", 1,
                         "PLAINTEXT", principal)

    async def run() -> Any:
        response = HANDLERS[api_key](services, ctx, request_type(**fields))
        return await response if inspect.isawaitable(response) else response

    response = asyncio.run(run())
    entity_writer(response_type)(io.BytesIO(), response)
    return response


def node(*bindings: AclBinding) -> BrokerServices:
    clock = ManualClock()
    config = CoordinatorConfig(offsets_topic_num_partitions=1, group_initial_rebalance_delay_ms=0,
                               offsets_topic_replication_factor=1)
    coordinator = GroupCoordinatorService(1, config, MemoryCoordinatorLog(), clock)

    async def start() -> None:
        await coordinator.start()
        coordinator.on_partitions_led({0})
        while coordinator.is_loading(0):
            await asyncio.sleep(0)

    asyncio.run(start())
    services = BrokerServices(node_id=1, config=Config(), registry=None, clock=clock,  # type: ignore[arg-type]
                              metadata=Metadata(), group_coordinator=coordinator)  # type: ignore[arg-type]
    services.authorization = static_authorizer(*bindings)
    return services


def commit(services: BrokerServices, group: str = "g", principal: str = "alice") -> dict[str, int]:
    req, _ = kio_schemas(8)(8)
    module = __import__(req.__module__, fromlist=["x"])
    topics = tuple(module.OffsetCommitRequestTopic(name=t, partitions=(module.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=5, committed_leader_epoch=-1, committed_metadata=""),))
        for t in ("a", "b"))
    resp = call(services, 8, 8, principal, group_id=group, generation_id_or_member_epoch=-1, member_id="",
                group_instance_id=None, topics=topics)
    return {t.name: int(t.partitions[0].error_code) for t in resp.topics}


def test_offset_commit_needs_read_on_the_group_and_each_topic() -> None:
    services = node(binding(Res.TOPIC, "a", Op.READ))
    assert commit(services) == {"a": E.group_authorization_failed, "b": E.group_authorization_failed}
    services = node(binding(Res.TOPIC, "a", Op.READ), binding(Res.GROUP, "g", Op.READ))
    assert commit(services) == {"a": 0, "b": E.topic_authorization_failed}
    assert commit(services, principal="admin") == {"a": 0, "b": 0}


def test_offset_fetch_needs_describe_on_the_group_and_filters_topics() -> None:
    services = node(binding(Res.TOPIC, "*", Op.READ), binding(Res.GROUP, "g", Op.READ))
    commit(services)
    req, _ = kio_schemas(9)(7)
    module = __import__(req.__module__, fromlist=["x"])

    def fetch(principal: str, topics: Any) -> Any:
        return call(services, 9, 7, principal, group_id="g", topics=topics, require_stable=False)

    every = fetch("admin", None)
    assert sorted(t.name for t in every.topics) == ["a", "b"]
    assert fetch("bob", None).error_code == E.group_authorization_failed
    services.authorization = static_authorizer(binding(Res.TOPIC, "a", Op.DESCRIBE),
                                               binding(Res.GROUP, "g", Op.DESCRIBE))
    assert [t.name for t in fetch("alice", None).topics] == ["a"]
    named = fetch("alice", (module.OffsetFetchRequestTopic(name="a", partition_indexes=(0,)),
                            module.OffsetFetchRequestTopic(name="b", partition_indexes=(0,))))
    assert {t.name: t.partitions[0].error_code for t in named.topics} == {"a": 0, "b": E.topic_authorization_failed}


def test_join_heartbeat_leave_and_sync_need_read_on_the_group() -> None:
    services = node(binding(Res.GROUP, "other", Op.READ))
    resp = call(services, 12, 4, group_id="g", generation_id=1, member_id="m", group_instance_id=None)
    assert resp.error_code == E.group_authorization_failed
    resp = call(services, 13, 5, group_id="g", members=())
    assert resp.error_code == E.group_authorization_failed
    req, _ = kio_schemas(11)(9)
    module = __import__(req.__module__, fromlist=["x"])
    fields = dict(group_id="g", session_timeout=datetime.timedelta(seconds=10),
                  rebalance_timeout=datetime.timedelta(seconds=10), member_id="", group_instance_id=None,
                  protocol_type="consumer", protocols=(module.JoinGroupRequestProtocol(name="range", metadata=b""),),
                  reason=None)
    assert call(services, 11, 9, **fields).error_code == E.group_authorization_failed
    services.authorization = static_authorizer(binding(Res.GROUP, "g", Op.READ))
    assert call(services, 11, 9, **fields).error_code != E.group_authorization_failed


def test_find_coordinator_needs_describe_on_the_key() -> None:
    services = node(binding(Res.GROUP, "g", Op.DESCRIBE))

    def find(key: str, key_type: int = 0) -> int:
        return int(call(services, 10, 3, key=key, key_type=key_type).error_code)

    assert find("g") == 0
    assert find("h") == E.group_authorization_failed
    assert find("tx", 1) == E.transactional_id_authorization_failed
    assert find("m:AAAAAAAAAAAAAAAAAAAAAA:0", 3) == E.cluster_authorization_failed


def test_list_describe_and_delete_groups_per_group() -> None:
    services = node(binding(Res.TOPIC, "*", Op.READ), binding(Res.GROUP, "*", Op.READ))
    commit(services, "g1")
    commit(services, "g2")
    services.authorization = static_authorizer(binding(Res.GROUP, "g1", Op.DESCRIBE))
    assert [g.group_id for g in call(services, 16, 4, states_filter=()).groups] == ["g1"]
    assert sorted(g.group_id for g in call(services, 16, 4, "admin", states_filter=()).groups) == ["g1", "g2"]
    described = call(services, 15, 5, groups=("g1", "g2"), include_authorized_operations=False).groups
    assert [(g.group_id, g.error_code) for g in described] == [("g1", 0), ("g2", E.group_authorization_failed)]
    services.authorization = static_authorizer(binding(Res.GROUP, "g2", Op.DELETE))
    deleted = call(services, 42, 2, groups_names=("g1", "g2")).results
    assert [(r.group_id, r.error_code) for r in deleted] == [("g1", E.group_authorization_failed), ("g2", 0)]
    # DESCRIBE on the cluster lists every group
    services.authorization = static_authorizer(binding(Res.CLUSTER, "kafka-cluster", Op.DESCRIBE))
    assert [g.group_id for g in call(services, 16, 4, states_filter=()).groups] == ["g1"]


def test_list_groups_leaves_groups_out_without_refusing(caplog: pytest.LogCaptureFixture) -> None:
    """Kafka: DESCRIBE on the cluster, then on each group, asked with logIfDenied=false."""
    services = node(binding(Res.TOPIC, "*", Op.READ), binding(Res.GROUP, "*", Op.READ))
    commit(services, "g1")
    commit(services, "g2")
    services.authorization = static_authorizer(binding(Res.GROUP, "g1", Op.DESCRIBE))
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    assert [g.group_id for g in call(services, 16, 4, states_filter=()).groups] == ["g1"]
    assert [r for r in caplog.records if r.name == AUDIT_LOGGER] == []
    call(services, 15, 5, groups=("g2",), include_authorized_operations=False)  # a named group: refused
    (refused,) = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    assert "is Denied operation = DESCRIBE" in refused and "Group:LITERAL:g2 for request = DescribeGroups" in refused


def test_describe_groups_reports_the_principals_operations() -> None:
    services = node(binding(Res.TOPIC, "*", Op.READ), binding(Res.GROUP, "g", Op.READ))
    commit(services)
    (group,) = call(services, 15, 5, groups=("g",), include_authorized_operations=True).groups
    assert group.authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
    (group,) = call(services, 15, 5, "admin", groups=("g",), include_authorized_operations=True).groups
    assert group.authorized_operations == (1 << Op.READ) | (1 << Op.DELETE) | (1 << Op.DESCRIBE)


def test_offset_delete_needs_delete_on_the_group_and_read_on_topics() -> None:
    services = node(binding(Res.TOPIC, "a", Op.READ), binding(Res.GROUP, "g", Op.READ))
    commit(services)
    req, _ = kio_schemas(47)(0)
    module = __import__(req.__module__, fromlist=["x"])
    topics = tuple(module.OffsetDeleteRequestTopic(name=t, partitions=(
        module.OffsetDeleteRequestPartition(partition_index=0),)) for t in ("a", "b"))
    assert call(services, 47, 0, group_id="g", topics=topics).error_code == E.group_authorization_failed
    services.authorization = static_authorizer(binding(Res.TOPIC, "a", Op.READ), binding(Res.GROUP, "g", Op.DELETE))
    resp = call(services, 47, 0, group_id="g", topics=topics)
    assert resp.error_code == 0
    assert {t.name: t.partitions[0].error_code for t in resp.topics}["b"] == E.topic_authorization_failed


def heartbeat_fields(group: str, topics: tuple[str, ...]) -> dict[str, Any]:
    return dict(group_id=group, member_id="m-1", member_epoch=0, instance_id=None, rack_id=None,
                rebalance_timeout=datetime.timedelta(seconds=30), subscribed_topic_names=topics,
                subscribed_topic_regex=None, server_assignor=None, topic_partitions=())


def test_consumer_group_heartbeat_needs_read_on_the_group_and_describe_on_subscribed_topics() -> None:
    services = node(binding(Res.TOPIC, "a", Op.DESCRIBE))
    assert call(services, 68, 1, **heartbeat_fields("g", ("a",))).error_code == E.group_authorization_failed
    services.authorization = static_authorizer(binding(Res.TOPIC, "a", Op.DESCRIBE), binding(Res.GROUP, "g", Op.READ))
    assert call(services, 68, 1, **heartbeat_fields("g", ("a", "b"))).error_code == E.topic_authorization_failed
    assert call(services, 68, 1, **heartbeat_fields("g", ("a",))).error_code != E.topic_authorization_failed
    described = call(services, 69, 1, group_ids=("g", "h"), include_authorized_operations=False).groups
    # READ on g implies DESCRIBE; h is refused
    assert [(g.group_id, g.error_code != E.group_authorization_failed) for g in described] == [
        ("g", True), ("h", False)]
