import pytest
from kio.schema.errors import ErrorCode

from kmirror.testing.metadata import call, metadata_services, request_entity, server_config

TOPIC, GROUP, CLUSTER = 2, 3, 4
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
READ, WRITE = 3, 4
ALLOW, DENY = 3, 2


def _create(services, version, *bindings):
    creations = tuple(
        request_entity(30, version, "AclCreation", resource_type=t, resource_name=n, resource_pattern_type=p,
                       principal=pr, host=h, operation=op, permission_type=perm)
        for t, n, p, pr, h, op, perm in bindings
    )
    return call(services, 30, version, {"creations": creations})


def _filter_fields(rtype=ANY, name=None, pattern=ANY, principal=None, host=None, op=1, perm=1):
    return {"resource_type_filter": rtype, "resource_name_filter": name, "pattern_type_filter": pattern,
            "principal_filter": principal, "host_filter": host, "operation": op, "permission_type": perm}


@pytest.mark.parametrize("version", [2, 3])
def test_create_describe_delete_acls(version: int) -> None:
    services = metadata_services()
    resp = _create(
        services, version,
        (TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW),
        (TOPIC, "ord", PREFIXED, "User:bob", "*", WRITE, ALLOW),
        (TOPIC, "*", LITERAL, "User:carol", "*", READ, DENY),
        (GROUP, "g", LITERAL, "User:alice", "*", READ, ALLOW),
        (TOPIC, "x", LITERAL, "alice", "*", READ, ALLOW),  # principal without type
        (CLUSTER, "c", LITERAL, "User:a", "*", READ, ALLOW),  # cluster name must be kafka-cluster
        (TOPIC, "x", MATCH, "User:a", "*", READ, ALLOW),  # MATCH is only a filter
        (TOPIC, "orders", LITERAL, "User:alice", "*", READ, ALLOW),  # duplicate: no-op success
    )
    assert [r.error_code for r in resp.results] == [ErrorCode.none] * 4 + [ErrorCode.invalid_request] * 3 + [ErrorCode.none]
    assert len(services.metadata.image.acls) == 4

    def describe(**f):
        resp = call(services, 29, version, _filter_fields(**f))
        assert resp.error_code == ErrorCode.none
        return sorted((r.resource_name, r.pattern_type, a.principal) for r in resp.resources for a in r.acls)

    assert len(describe()) == 4
    assert describe(rtype=TOPIC, name="orders", pattern=MATCH) == [
        ("*", LITERAL, "User:carol"),
        ("ord", PREFIXED, "User:bob"),
        ("orders", LITERAL, "User:alice"),
    ]
    assert describe(rtype=TOPIC, name="orders", pattern=ANY) == [("orders", LITERAL, "User:alice")]
    assert describe(rtype=TOPIC, pattern=PREFIXED) == [("ord", PREFIXED, "User:bob")]
    assert describe(principal="User:alice") == [("g", LITERAL, "User:alice"), ("orders", LITERAL, "User:alice")]
    assert describe(op=WRITE) == [("ord", PREFIXED, "User:bob")]
    assert describe(perm=DENY) == [("*", LITERAL, "User:carol")]
    bad = call(services, 29, version, _filter_fields(rtype=0))
    assert bad.error_code == ErrorCode.invalid_request

    filters = (
        request_entity(31, version, "DeleteAclsFilter", **_filter_fields(principal="User:alice")),
        request_entity(31, version, "DeleteAclsFilter", **_filter_fields(rtype=TOPIC, name="orders", pattern=MATCH)),
        request_entity(31, version, "DeleteAclsFilter", **_filter_fields(pattern=0)),
    )
    resp = call(services, 31, version, {"filters": filters})
    r1, r2, r3 = resp.filter_results
    assert sorted(m.resource_name for m in r1.matching_acls) == ["g", "orders"]
    assert sorted(m.resource_name for m in r2.matching_acls) == ["*", "ord", "orders"]
    assert r3.error_code == ErrorCode.invalid_request
    assert services.metadata.image.acls == {}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_describe_cluster(version: int) -> None:
    services = metadata_services()
    resp = call(services, 60, version, {"include_cluster_authorized_operations": False, "endpoint_type": 1,
                                        "include_fenced_brokers": False})
    assert resp.error_code == ErrorCode.none
    assert resp.cluster_id == services.metadata.image.cluster_id
    assert resp.controller_id == 1
    assert [(b.broker_id, b.host, b.port) for b in resp.brokers] == [(1, "127.0.0.1", 9092)]
    assert resp.cluster_authorized_operations == -2147483648


def test_describe_cluster_controller_endpoints() -> None:
    cfg = server_config(
        listeners="PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        controller_listener_names="CONTROLLER",
        controller_quorum_voters="1@127.0.0.1:9093",
    )
    services = metadata_services(cfg)
    fields = {"include_cluster_authorized_operations": True, "endpoint_type": 2, "include_fenced_brokers": False}
    resp = call(services, 60, 1, fields)
    assert resp.error_code == ErrorCode.unsupported_endpoint_type
    resp = call(services, 60, 1, fields, listener="CONTROLLER")
    assert resp.error_code == ErrorCode.none
    assert [(b.broker_id, b.port) for b in resp.brokers] == [(1, 9093)]
    assert resp.cluster_authorized_operations != -2147483648
