"""KIP-1279 "Security Control" for the mirror RPCs, with the authorizer on."""

from __future__ import annotations

import asyncio
import io
import logging
import uuid
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from kmirror.broker.api import RequestContext, load_handlers
from kmirror.broker.authorization import ALLOW_ALL
from kmirror.broker.authorizer_audit import AUDIT_LOGGER
from kmirror.kip1279.errors import MirrorError
from kmirror.metadata.controller.acls import AclOperation as Op
from kmirror.metadata.controller.acls import ResourceType as Res
from kmirror.metadata.controller.mirrors import FeatureUpdate
from kmirror.mirror.coordinator.coordinator import MirrorCoordinator
from kmirror.mirror.service import MirrorCoordinatorService
from kmirror.mirror.source_lookup import SourceDescription, SourceTopic
from kmirror.protocol.codec import RequestHeaderView
from kmirror.protocol.errors import ErrorCode
from kmirror.protocol.mirror import (
    add_topics_to_mirror,
    create_mirror,
    delete_mirror,
    describe_mirrors,
    list_mirrors,
    pause_mirror_topics,
    read_mirror_states,
    remove_topics_from_mirror,
)
from kmirror.testing.authorization import CLUSTER_LISTENER, enable_authorizer, grant
from kmirror.testing.metadata import metadata_services

SOURCE_ID = uuid.UUID("11111111-2222-4333-8444-555555555555")
DENIED = int(MirrorError.MIRROR_AUTHORIZATION_FAILED)
TOPIC_DENIED = int(ErrorCode.topic_authorization_failed)


def mirror_call(services: Any, api_key: int, request: Any, response_type: type, principal: str = "alice",
                listener: str = "PLAINTEXT") -> Any:
    handler = {d.api_key: d for d in load_handlers()}[api_key].handler
    ctx = RequestContext(RequestHeaderView(api_key, 0, 1, "test"), response_type, "127.0.0.1", 1, listener, principal)

    async def run() -> Any:
        result = handler(services, ctx, request)
        return await result if asyncio.iscoroutine(result) else result

    result = asyncio.run(run())
    buf = io.BytesIO()
    entity_writer(response_type)(buf, result)
    return entity_reader(response_type)(buf.getvalue(), 0)[0]


def services_with_mirror() -> Any:
    services = metadata_services()
    asyncio.run(services.metadata.update_features([FeatureUpdate("mirror.version", 1)], {"mirror.version": (0, 1)}))
    topics = {n: SourceTopic(n, uuid.UUID(int=i + 7), 1, {}) for i, n in enumerate(("orders", "payments"))}

    async def lookup(mirror_name: Any, config: Any, names: Any) -> SourceDescription:
        return SourceDescription("source-cluster", {n: topics.get(n, 3) for n in names})

    services.mirror_coordinator = MirrorCoordinatorService(MirrorCoordinator(4), lookup)
    enable_authorizer(services)
    assert create(services, "m1", principal="admin").error_code == 0
    assert create(services, "m2", principal="admin").error_code == 0
    return services


def create(services: Any, name: str, principal: str = "alice") -> Any:
    req = create_mirror.CreateMirrorRequest(
        mirror_name=name, config=(create_mirror.MirrorConfig(name="bootstrap.servers", value="source:9092"),))
    return mirror_call(services, 94, req, create_mirror.CreateMirrorResponse, principal)


def add(services: Any, name: str, *topics: str, principal: str = "alice") -> Any:
    req = add_topics_to_mirror.AddTopicsToMirrorRequest(mirror_name=name, topics=tuple(
        add_topics_to_mirror.TopicData(topic_id=None, topic_name=t) for t in topics))
    return mirror_call(services, 95, req, add_topics_to_mirror.AddTopicsToMirrorResponse, principal)


def listed(services: Any, principal: str = "alice") -> list[str]:
    resp = mirror_call(services, 98, list_mirrors.ListMirrorsRequest(), list_mirrors.ListMirrorsResponse, principal)
    assert resp.error_code == 0
    return [m.mirror_name for m in resp.mirrors]


def described(services: Any, *names: str, principal: str = "alice") -> dict[str, int]:
    resp = mirror_call(services, 99, describe_mirrors.DescribeMirrorsRequest(mirror_names=names),
                       describe_mirrors.DescribeMirrorsResponse, principal)
    return {m.mirror_name: int(m.error_code) for m in resp.mirrors}


def test_create_mirror_needs_create_on_the_cluster_mirror() -> None:
    services = services_with_mirror()
    assert create(services, "m3").error_code == DENIED
    grant(services, Res.CLUSTER_MIRROR, "m3", Op.ALTER)  # another operation is not enough
    assert create(services, "m3").error_code == DENIED
    grant(services, Res.CLUSTER_MIRROR, "m", Op.CREATE, pattern=4)  # PREFIXED
    assert create(services, "m3").error_code == 0
    assert create(services, "other").error_code == DENIED


def test_delete_mirror_needs_alter_on_the_cluster_mirror() -> None:
    services = services_with_mirror()
    req = delete_mirror.DeleteMirrorRequest(mirror_name="m2")
    assert mirror_call(services, 104, req, delete_mirror.DeleteMirrorResponse).error_code == DENIED
    grant(services, Res.CLUSTER_MIRROR, "m2", Op.ALTER)
    assert mirror_call(services, 104, req, delete_mirror.DeleteMirrorResponse).error_code == 0


def test_add_topics_needs_alter_on_the_mirror_and_read_on_each_topic() -> None:
    services = services_with_mirror()
    resp = add(services, "m1", "orders", "payments")
    assert resp.error_code == DENIED and [t.error_code for t in resp.topics] == [DENIED, DENIED]
    grant(services, Res.CLUSTER_MIRROR, "m1", Op.ALTER)
    grant(services, Res.TOPIC, "orders", Op.READ)
    resp = add(services, "m1", "orders", "payments")
    assert resp.error_code == 0
    assert {t.name: t.error_code for t in resp.topics} == {"orders": 0, "payments": TOPIC_DENIED}
    assert "orders" in services.metadata.image.topics and "payments" not in services.metadata.image.topics


def test_remove_and_pause_need_alter_on_the_mirror_and_read_on_the_topic() -> None:
    services = services_with_mirror()
    assert add(services, "m1", "orders", principal="admin").topics[0].error_code == 0
    req = remove_topics_from_mirror.RemoveTopicsFromMirrorRequest(mirror_name="m1", topics=(
        remove_topics_from_mirror.TopicData(topic_id=None, topic_name="orders"),))
    resp = mirror_call(services, 96, req, remove_topics_from_mirror.RemoveTopicsFromMirrorResponse)
    assert resp.error_code == DENIED and resp.topics[0].error_code == DENIED
    grant(services, Res.CLUSTER_MIRROR, "m1", Op.ALTER)
    pause = pause_mirror_topics.PauseMirrorTopicsRequest(mirror_name="m1", topics=(
        pause_mirror_topics.TopicData(topic_id=None, topic_name="orders"),))
    resp = mirror_call(services, 102, pause, pause_mirror_topics.PauseMirrorTopicsResponse)
    assert resp.error_code == 0 and resp.topics[0].error_code == TOPIC_DENIED
    grant(services, Res.TOPIC, "orders", Op.READ)
    resp = mirror_call(services, 102, pause, pause_mirror_topics.PauseMirrorTopicsResponse)
    # authorized: the membership workflow answers (here: no partition state is MIRRORING yet)
    assert resp.topics[0].error_code not in (TOPIC_DENIED, DENIED)


def test_list_and_describe_show_only_describable_mirrors() -> None:
    services = services_with_mirror()
    assert listed(services) == []
    assert described(services) == {}
    assert described(services, "m1", "nope") == {"m1": DENIED, "nope": DENIED}  # existence is not revealed
    grant(services, Res.CLUSTER_MIRROR, "m1", Op.DESCRIBE)
    assert listed(services) == ["m1"]
    assert described(services) == {"m1": 0}
    assert described(services, "m1", "m2") == {"m1": 0, "m2": DENIED}
    # ALTER implies DESCRIBE; READ on the cluster describes every mirror
    grant(services, Res.CLUSTER_MIRROR, "m2", Op.ALTER, principal="User:bob")
    assert listed(services, principal="bob") == ["m2"]
    grant(services, Res.CLUSTER, "kafka-cluster", Op.READ, principal="User:carol")
    assert sorted(listed(services, principal="carol")) == ["m1", "m2"]
    assert sorted(listed(services, principal="admin")) == ["m1", "m2"]


def test_listing_mirrors_refuses_nothing_naming_one_does(caplog: pytest.LogCaptureFixture) -> None:
    services = services_with_mirror()
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    assert listed(services) == [] and described(services) == {}
    assert [r for r in caplog.records if r.name == AUDIT_LOGGER] == []
    described(services, "m1")
    (refused,) = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    assert "is Denied operation = DESCRIBE" in refused
    assert "on resource = ClusterMirror:LITERAL:m1 for request = DescribeMirrors" in refused


def test_a_deny_on_the_mirror_wins() -> None:
    services = services_with_mirror()
    grant(services, Res.CLUSTER_MIRROR, "*", Op.ALL, principal="User:*")
    grant(services, Res.CLUSTER_MIRROR, "m2", Op.DESCRIBE, deny=True)
    assert listed(services) == ["m1"]
    assert listed(services, principal="bob") == ["m1", "m2"]


def test_mirror_state_rpcs_need_cluster_action() -> None:
    services = services_with_mirror()
    req = read_mirror_states.ReadMirrorStatesRequest(mirror_name="m1", topics=())
    resp = mirror_call(services, 100, req, read_mirror_states.ReadMirrorStatesResponse)
    assert resp.error_code == ErrorCode.cluster_authorization_failed
    # the cluster's own listener is unrestricted
    resp = mirror_call(services, 100, req, read_mirror_states.ReadMirrorStatesResponse, listener=CLUSTER_LISTENER)
    assert resp.error_code != ErrorCode.cluster_authorization_failed
    grant(services, Res.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION)
    resp = mirror_call(services, 100, req, read_mirror_states.ReadMirrorStatesResponse)
    assert resp.error_code != ErrorCode.cluster_authorization_failed


def test_without_an_authorizer_every_mirror_rpc_is_allowed() -> None:
    services = services_with_mirror()
    services.authorization = ALLOW_ALL
    assert create(services, "m3").error_code == 0
    assert sorted(listed(services)) == ["m1", "m2", "m3"]
    assert add(services, "m1", "orders").topics[0].error_code == 0
