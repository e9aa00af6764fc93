"""ACL sync (KIP-1279 "MirrorMetadataManager": "Creates missing ACLs").

For each mirror this broker coordinates, every refresh: DescribeAcls at the source (every
binding), keep those matching one of `mirror.acl.include` (`resourceType;resourceName;
operation;permissionType;principal`, names as Kafka prints them: TOPIC, READ, ALLOW), and
CreateAcls at the destination for those its metadata image does not hold.

Decisions:
- create only: a destination binding the source lacks is never deleted (the KIP says
  "Creates missing ACLs"; the destination's own ACLs, e.g. for its consumers after a
  failover, are the operator's), and a binding removed at the source stays at the
  destination;
- the source's bindings are copied whatever their resource (not only mirrored topics'):
  which ones is what `mirror.acl.include` selects;
- a failed DescribeAcls or CreateAcls counts one AclSyncError and is retried next refresh.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from kmirror.client.acls import AclBinding
from kmirror.config.mirror import MirrorConfig
from kmirror.metadata.controller.acls import AclOperation, AclPermissionType, ResourceType
from kmirror.mirror.metadata_sync.syncer import CoordinatedMirrorSync

log = logging.getLogger(__name__)


def _name(enum: Any, code: int) -> str:
    try:
        return str(enum(code).name)
    except ValueError:
        return "UNKNOWN"


def is_included(config: MirrorConfig, binding: AclBinding) -> bool:
    return config.is_acl_included(_name(ResourceType, binding.resource_type), binding.resource_name,
                                  _name(AclOperation, binding.operation),
                                  _name(AclPermissionType, binding.permission_type), binding.principal)


def destination_bindings(image: Any) -> set[AclBinding]:
    """The destination's bindings, from its metadata image."""
    return {AclBinding(b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation,
                       b.permission_type) for b in image.acls.values()}


def acls_to_create(config: MirrorConfig, source: Iterable[AclBinding], destination: set[AclBinding]) -> list[AclBinding]:
    """The included source bindings the destination lacks, in the source's order."""
    out: list[AclBinding] = []
    for binding in source:
        if binding not in destination and binding not in out and is_included(config, binding):
            out.append(binding)
    return out


class AclSync(CoordinatedMirrorSync):
    """The syncer of ACLs."""

    async def sync(self, image: Any, mirror_name: str, config: MirrorConfig) -> None:
        await self.sync_mirror(mirror_name, config, destination_bindings(image))

    async def sync_mirror(self, mirror_name: str, config: MirrorConfig, destination: set[AclBinding]) -> None:
        admin = self.admins.destination()
        if admin is None:
            return
        try:
            missing = acls_to_create(config, await self.admins.source(mirror_name, config).describe_acls(),
                                     destination)
            if not missing:
                return
            errors = [e for e in (await admin.create_acls(missing)).values() if e is not None]
        except Exception as exc:
            self.sync_errors.acl += 1
            log.warning("mirror %s: ACL sync failed: %s", mirror_name, exc)
            return
        if errors:
            self.sync_errors.acl += 1
            log.warning("mirror %s: creating ACLs failed: %s", mirror_name, ", ".join(sorted({str(e) for e in errors})))
        else:
            log.info("mirror %s: created %d ACL(s) from the source", mirror_name, len(missing))
