"""The per-API authorization policies and the check run before a handler."""

from __future__ import annotations

import io
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kio.serial import entity_writer

from kmirror.broker.api import PLANES, RequestContext, load_handlers
from kmirror.broker.api_authorization import PER_RESOURCE, POLICIES, UNCHECKED, guarded
from kmirror.broker.authorization import ALLOW_ALL, denied_response
from kmirror.metadata.controller.acls import AclOperation as Op
from kmirror.metadata.controller.acls import ResourceType as Res
from kmirror.protocol.codec import RequestHeaderView
from kmirror.protocol.errors import ErrorCode
from kmirror.protocol.mirror.registry import schemas as mirror_schemas
from kmirror.protocol.registry import kio_schemas
from kmirror.testing.authorization import CLUSTER_LISTENER, binding, static_authorizer

SECURITY_DOC = Path(__file__).parents[3] / "docs" / "design" / "security.md"


def response_type(api_key: int, version: int) -> Any:
    lookup = mirror_schemas(api_key) if api_key >= 94 else kio_schemas(api_key)
    return lookup(version)[1]


def ctx(api_key: int, version: int, principal: str = "alice", listener: str = "PLAINTEXT") -> RequestContext:
    return RequestContext(RequestHeaderView(api_key, version, 1, "t"), response_type(api_key, version), "127.0.0.1",
                          1, listener, principal)


def test_every_registered_api_has_a_policy() -> None:
    """An API added without one is refused to all but the unrestricted (fail closed); this
    test makes adding one a decision, and the docs list it."""
    registered = {d.api_key for plane in PLANES for d in load_handlers(plane)}
    assert registered - POLICIES.keys() == set()


def test_the_security_doc_lists_every_api_and_its_policy_kind() -> None:
    text = SECURITY_DOC.read_text()
    names = {d.api_key: d.name for plane in PLANES for d in load_handlers(plane)}
    for key, policy in POLICIES.items():
        row = re.search(rf"^\| {names[key]} \((\d+)\) \|(.*)$", text, re.MULTILINE)
        assert row is not None, f"{names[key]} missing from docs/design/security.md"
        assert int(row.group(1)) == key
        if policy == UNCHECKED:
            assert "nothing" in row.group(2), names[key]


def test_an_api_without_a_policy_fails_closed() -> None:
    calls = []

    def handler(services: Any, c: RequestContext, request: Any) -> str:
        calls.append(c.principal)
        return "handled"

    unknown_key = 29  # any response type with a top-level error code; the policy is looked up by key
    saved = POLICIES.pop(unknown_key)
    try:
        run = guarded(unknown_key, "broker", handler)
    finally:
        POLICIES[unknown_key] = saved
    on = SimpleNamespace(authorization=static_authorizer(binding(Res.CLUSTER, "kafka-cluster", Op.ALL)))
    refused = run(on, ctx(29, 3), None)
    assert refused.error_code == ErrorCode.cluster_authorization_failed and calls == []
    assert run(on, ctx(29, 3, principal="admin"), None) == "handled"
    assert run(on, ctx(29, 3, listener=CLUSTER_LISTENER), None) == "handled"
    assert run(SimpleNamespace(authorization=ALLOW_ALL), ctx(29, 3), None) == "handled"


def test_a_cluster_policy_is_checked_before_the_handler() -> None:
    def handler(services: Any, c: RequestContext, request: Any) -> str:
        return "handled"

    run = guarded(29, "broker", handler)  # DescribeAcls: DESCRIBE on the cluster
    assert run(SimpleNamespace(authorization=static_authorizer()), ctx(29, 3), None).error_code == \
        ErrorCode.cluster_authorization_failed
    allowed = static_authorizer(binding(Res.CLUSTER, "kafka-cluster", Op.ALTER))  # ALTER implies DESCRIBE
    assert run(SimpleNamespace(authorization=allowed), ctx(29, 3), None) == "handled"
    denied = static_authorizer(binding(Res.CLUSTER, "kafka-cluster", Op.ALTER),
                               binding(Res.CLUSTER, "kafka-cluster", Op.DESCRIBE, deny=True))
    assert run(SimpleNamespace(authorization=denied), ctx(29, 3), None).error_code == \
        ErrorCode.cluster_authorization_failed


def test_a_group_policy_names_the_group_of_the_request() -> None:
    def handler(services: Any, c: RequestContext, request: Any) -> str:
        return "handled"

    run = guarded(12, "broker", handler)  # Heartbeat: READ on the group
    services = SimpleNamespace(authorization=static_authorizer(binding(Res.GROUP, "g", Op.READ)))
    assert run(services, ctx(12, 4), SimpleNamespace(group_id="g")) == "handled"
    assert run(services, ctx(12, 4), SimpleNamespace(group_id="h")).error_code == ErrorCode.group_authorization_failed


def test_controller_plane_apis_need_cluster_action() -> None:
    def handler(services: Any, c: RequestContext, request: Any) -> str:
        return "handled"

    run = guarded(63, "controller", handler)
    services = SimpleNamespace(authorization=static_authorizer())
    assert run(services, ctx(63, 1), None).error_code == ErrorCode.cluster_authorization_failed
    assert run(services, ctx(63, 1, listener=CLUSTER_LISTENER), None) == "handled"


CENTRAL = sorted(k for k, p in POLICIES.items() if p not in (UNCHECKED, PER_RESOURCE))


@pytest.mark.parametrize("api_key", CENTRAL)
def test_refusals_of_centrally_checked_apis_encode_at_every_version(api_key: int) -> None:
    versions = {d.api_key: (d.min_version, d.max_version) for plane in PLANES for d in load_handlers(plane)}
    low, high = versions[api_key]
    for version in range(low, high + 1):
        rt = response_type(api_key, version)
        refused = denied_response(rt, ErrorCode.group_authorization_failed)
        entity_writer(rt)(io.BytesIO(), refused)
        if hasattr(refused, "error_code"):
            assert int(refused.error_code) == ErrorCode.group_authorization_failed


@pytest.mark.parametrize("name", ["org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                  "kmirror.StandardAuthorizer"])
def test_authorizer_configs_enable_it_with_the_cluster_listeners_unrestricted(name: str) -> None:
    from kmirror.broker.authorization import RequestAuthorizer
    from kmirror.ports import ManualClock
    from kmirror.testing.metadata import server_config

    config = server_config(**{
        "listeners": "PLAINTEXT://127.0.0.1:9092,CLIENT://127.0.0.1:9093,CONTROLLER://127.0.0.1:9192",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER", "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.client.plain.sasl.jaas.config":
            "org.apache.kafka.common.security.plain.PlainLoginModule required user_alice=\"a\";",
        "authorizer.class.name": name,
        "super.users": "User:admin;User:ops", "allow.everyone.if.no.acl.found": "true"})
    authorizer = RequestAuthorizer.from_config(config, lambda: {}, ManualClock())
    assert authorizer.enabled and authorizer.privileged_listeners == {"PLAINTEXT", "CONTROLLER"}
    assert authorizer.unrestricted(ctx(29, 3, "alice", "PLAINTEXT"))
    assert not authorizer.unrestricted(ctx(29, 3, "alice", "CLIENT"))
    # a super user is asked about, and allowed by the SuperUser rule
    assert not authorizer.unrestricted(ctx(29, 3, "ops", "CLIENT")) and authorizer.is_super_user(ctx(29, 3, "ops", "CLIENT"))
    assert authorizer.authorize(ctx(29, 3, "ops", "CLIENT"), Op.ALTER, Res.CLUSTER, "kafka-cluster")
    assert authorizer.authorize(ctx(29, 3, "alice", "CLIENT"), Op.READ, Res.TOPIC, "t")  # no ACL: allowed


def test_no_authorizer_by_default_and_unknown_names_refused() -> None:
    from kmirror.broker.authorization import RequestAuthorizer
    from kmirror.config.definitions import ConfigError
    from kmirror.ports import ManualClock
    from kmirror.testing.metadata import server_config

    assert not RequestAuthorizer.from_config(server_config(), lambda: {}, ManualClock()).enabled
    with pytest.raises(ConfigError):
        server_config(**{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
