"""ACL sync on real processes (KIP-1279 "MirrorMetadataManager"): bindings the source drops,
within `mirror.acl.include`, are deleted at the destination once the mirror has copied them;
the destination's own bindings (created there alone, or outside the include rules) stay
(docs/design/mirroring.md "ACL sync: which ACLs the mirror manages")."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from kmirror.testing.mirror_clusters import create_mirror, wait_until
from kmirror.testing.processes import LocalCluster

pytestmark = pytest.mark.integration


@pytest.fixture
def dest_overrides() -> dict[str, str]:
    return {"mirror.metadata.refresh.interval.ms": "500"}


def binding(resource_type: ResourceType, name: str, principal: str, operation: AclOperation) -> AclBinding:
    return AclBinding(resource_type, name, ResourcePatternType.LITERAL, principal, "*", operation,
                      AclPermissionType.ALLOW)


def acls(bootstrap: str) -> set[AclBinding]:
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    admin = AdminClient({"bootstrap.servers": bootstrap})  # alive until the answer arrives
    return set(admin.describe_acls(flt).result(30))


def create(bootstrap: str, *bindings: AclBinding) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_acls(list(bindings)).values():
        future.result(30)


def delete(bootstrap: str, *bindings: AclBinding) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                b.permission_type) for b in bindings]
    for future in admin.delete_acls(filters).values():
        future.result(30)


def test_acls_dropped_at_the_source_are_deleted_and_the_destinations_own_stay(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    alice = binding(ResourceType.TOPIC, "orders", "User:alice", AclOperation.READ)
    bob = binding(ResourceType.TOPIC, "orders", "User:bob", AclOperation.WRITE)
    group = binding(ResourceType.GROUP, "app", "User:bob", AclOperation.READ)  # outside the include rules
    local = binding(ResourceType.TOPIC, "orders", "User:dr-reader", AclOperation.READ)  # the destination's own
    create(source.bootstrap, alice, bob, group)
    create(dest.bootstrap, local, group)
    create_mirror(dest, source, "m", None, tmp_path / "mirror.properties", {"mirror.acl.include": "TOPIC"})
    wait_until(lambda: {alice, bob} <= acls(dest.bootstrap), "the source's topic ACLs copied",
               seen=lambda: acls(dest.bootstrap))

    delete(source.bootstrap, bob, group)
    wait_until(lambda: bob not in acls(dest.bootstrap), "bob's ACL deleted at the destination",
               seen=lambda: acls(dest.bootstrap))
    # Later refreshes ran (a new source ACL arrives) and deleted nothing else.
    carol = binding(ResourceType.TOPIC, "orders", "User:carol", AclOperation.DESCRIBE)
    create(source.bootstrap, carol)
    wait_until(lambda: carol in acls(dest.bootstrap), "carol's ACL copied")
    assert acls(dest.bootstrap) == {alice, carol, local, group}
    assert acls(source.bootstrap) == {alice, carol}
    assert "deleted 1 ACL(s) the source no longer has: TOPIC:orders User:bob WRITE ALLOW" in dest.log_text()


def test_the_managed_set_survives_a_destination_restart(clusters: tuple[LocalCluster, LocalCluster],
                                                          tmp_path: Path) -> None:
    """The bindings the mirror manages are persisted in `__mirror_state`: a binding the source
    drops while the destination is down is deleted once it is back, and a binding the
    destination created alone is still kept (docs/design/mirroring.md)."""
    source, dest = clusters
    alice = binding(ResourceType.TOPIC, "orders", "User:alice", AclOperation.READ)
    bob = binding(ResourceType.TOPIC, "orders", "User:bob", AclOperation.WRITE)
    local = binding(ResourceType.TOPIC, "orders", "User:dr-reader", AclOperation.READ)
    create(source.bootstrap, alice, bob)
    create(dest.bootstrap, local)
    create_mirror(dest, source, "m", None, tmp_path / "mirror.properties", {"mirror.acl.include": "TOPIC"})
    wait_until(lambda: {alice, bob} <= acls(dest.bootstrap), "the source's topic ACLs copied",
               seen=lambda: acls(dest.bootstrap))

    dest.kill9()
    delete(source.bootstrap, bob)
    dest.start_node(1)
    wait_until(lambda: bob not in acls(dest.bootstrap), "bob's ACL deleted after the restart",
               seen=lambda: acls(dest.bootstrap), timeout_s=90)
    assert acls(dest.bootstrap) == {alice, local}
    assert "deleted 1 ACL(s) the source no longer has: TOPIC:orders User:bob WRITE ALLOW" in dest.log_text()
