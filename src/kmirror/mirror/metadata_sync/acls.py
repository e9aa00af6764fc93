"""ACL sync (KIP-1279 "MirrorMetadataManager": "Creates missing ACLs", "Deletes ACLs that
exist in destination but not in source").

For each mirror this broker coordinates, every refresh: DescribeAcls at the source (every
binding), keep those matching one of `mirror.acl.include` (`resourceType;resourceName;
operation;permissionType;principal`, names as Kafka prints them: TOPIC, READ, ALLOW), and
CreateAcls at the destination for those its metadata image does not hold; then DeleteAcls at
the destination for the bindings the mirror manages that the source no longer has.

Decisions (docs/design/mirroring.md "ACL sync: which ACLs the mirror manages"):
- a destination binding is managed by the mirror when it matches `mirror.acl.include` AND
  this coordinator saw it at the source, within the include rules, at an earlier refresh
  (`ManagedAcls`). Only those are deleted when the source stops listing them. A binding
  created at the destination alone (the destination's operators, its brokers, the
  CLUSTER_MIRROR ACLs that administer the mirror itself, another mirror's) is never deleted,
  whatever `mirror.acl.include` says;
- the managed set is persisted in `__mirror_state` (record MirrorManagedAcls, in the
  mirror's metadata partition, whose leader is the mirror's coordinator) before any
  deletion it leads to: a restarted or new coordinator reads it back, so a binding the
  source dropped while no coordinator watched is still deleted, and one the destination
  created meanwhile is still not. Only the very first refresh of a mirror (nothing
  persisted yet) learns without deleting. While the partition is loading, the sync waits;
- a binding another mirror of this coordinator still copies from its own source is not
  deleted (two mirrors never undo each other's copy);
- the source's bindings are copied whatever their resource (not only mirrored topics'):
  which ones is what `mirror.acl.include` selects;
- a failed DescribeAcls, CreateAcls or DeleteAcls counts one AclSyncError and is retried
  next refresh (a binding whose deletion failed stays managed).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from enum import IntEnum
from typing import Protocol

from kmirror.client.acls import AclBinding
from kmirror.client.admin import Admin
from kmirror.config.mirror import MirrorConfig
from kmirror.metadata.controller.acls import AclOperation, AclPermissionType, ResourceType
from kmirror.metadata.image import MetadataImage
from kmirror.mirror.coordinator.records import AclEntry
from kmirror.mirror.metadata_sync.admins import SyncAdmins
from kmirror.mirror.metadata_sync.coordination import coordinated_mirrors
from kmirror.mirror.metadata_sync.syncer import CoordinatedMirrorSync
from kmirror.mirror.sync_errors import MirrorSyncErrors
from kmirror.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


def _name(enum: type[IntEnum], code: int) -> str:
    try:
        return str(enum(code).name)
    except ValueError:
        return "UNKNOWN"


def is_included(config: MirrorConfig, binding: AclBinding) -> bool:
    return config.is_acl_included(_name(ResourceType, binding.resource_type), binding.resource_name,
                                  _name(AclOperation, binding.operation),
                                  _name(AclPermissionType, binding.permission_type), binding.principal)


def destination_bindings(image: MetadataImage) -> set[AclBinding]:
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


def acls_to_delete(config: MirrorConfig, source: Iterable[AclBinding], destination: set[AclBinding],
                   managed: set[AclBinding] | None, kept_by_others: set[AclBinding]) -> list[AclBinding]:
    """The destination bindings the mirror manages (`managed`: seen at the source within
    the include rules at an earlier refresh; None before the first) that the source no
    longer lists, minus those another mirror still copies (`kept_by_others`), sorted."""
    if managed is None:
        return []
    listed = set(source)
    return sorted((b for b in destination & managed
                   if b not in listed and b not in kept_by_others and is_included(config, b)),
                  key=_binding_order)


def _binding_order(b: AclBinding) -> tuple[int, str, int, str, str, int, int]:
    return (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation, b.permission_type)


class ManagedAclCoordinator(Protocol):
    """The node's `MirrorCoordinatorService`, which persists a mirror's managed bindings in
    `__mirror_state` (record MirrorManagedAcls)."""

    def managed_acls(self, mirror_name: str) -> frozenset[AclEntry] | None | ErrorCode: ...

    async def write_managed_acls(self, mirror_name: str, acls: frozenset[AclEntry]) -> ErrorCode: ...


class ManagedAclStore:
    """Where a mirror's managed bindings persist: `__mirror_state` through the node's
    `MirrorCoordinatorService`, or memory when the node has none (unit tests)."""

    def __init__(self, service: ManagedAclCoordinator | None = None) -> None:
        self.service = service
        self.memory: dict[str, frozenset[AclEntry]] = {}

    def load(self, mirror_name: str) -> set[AclBinding] | None | ErrorCode:
        """The persisted set; None when none was ever written; an error while this broker
        cannot read it (its `__mirror_state` partition is loading or led elsewhere)."""
        entries = self.memory.get(mirror_name) if self.service is None else self.service.managed_acls(mirror_name)
        if entries is None or isinstance(entries, ErrorCode):
            return entries
        return {AclBinding(*entry) for entry in entries}

    async def save(self, mirror_name: str, acls: set[AclBinding]) -> ErrorCode:
        entries = frozenset((b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation,
                             b.permission_type) for b in acls)
        if self.service is None:
            self.memory[mirror_name] = entries
            return ErrorCode.none
        return await self.service.write_managed_acls(mirror_name, entries)


class AclSync(CoordinatedMirrorSync):
    """The syncer of ACLs. `managed`: per mirror, the included source bindings of its last
    successful DescribeAcls (and the bindings whose deletion has not succeeded yet), as
    persisted in `store`."""

    def __init__(self, broker_id: int, image: Callable[[], MetadataImage | None], admins: SyncAdmins,
                 sync_errors: MirrorSyncErrors, is_halted: Callable[[str], bool] = lambda mirror_name: False, *,
                 store: ManagedAclStore | None = None) -> None:
        super().__init__(broker_id, image, admins, sync_errors, is_halted)
        self.store = store or ManagedAclStore()
        self.managed: dict[str, set[AclBinding]] = {}

    async def run_once(self) -> None:
        coordinated = {m.name for m in coordinated_mirrors(self.image(), self.broker_id)}
        for name in set(self.managed) - coordinated:  # moved away or deleted: forget it
            del self.managed[name]
        await super().run_once()

    async def sync(self, image: MetadataImage, mirror_name: str, config: MirrorConfig) -> None:
        await self.sync_mirror(mirror_name, config, destination_bindings(image))

    async def sync_mirror(self, mirror_name: str, config: MirrorConfig, destination: set[AclBinding]) -> None:
        admin = self.admins.destination()
        if admin is None:
            return
        if mirror_name not in self.managed:
            persisted = self.store.load(mirror_name)
            if isinstance(persisted, ErrorCode):
                log.debug("mirror %s: managed ACLs not readable yet (%s)", mirror_name, persisted.name)
                return
            managed = persisted
        else:
            managed = self.managed[mirror_name]
        try:
            source = await self.admins.source(mirror_name, config).describe_acls()
        except Exception as exc:
            self.sync_errors.acl += 1
            log.warning("mirror %s: ACL sync failed: %s", mirror_name, exc)
            return
        included = {b for b in source if is_included(config, b)}
        others = set().union(*(seen for name, seen in self.managed.items() if name != mirror_name))
        stale = acls_to_delete(config, source, destination, managed, others)
        # Persisted before the deletions it leads to (a restart must not forget a binding
        # it was about to delete, nor manage one it never saw).
        if not await self._persist(mirror_name, managed, included | set(stale)):
            return
        await self._create(mirror_name, admin, acls_to_create(config, source, destination))
        if stale and await self._delete(mirror_name, admin, stale):
            await self._persist(mirror_name, self.managed[mirror_name], self.managed[mirror_name] - set(stale))

    async def _persist(self, mirror_name: str, before: set[AclBinding] | None, after: set[AclBinding]) -> bool:
        if before != after:
            error = await self.store.save(mirror_name, after)
            if error is not ErrorCode.none:
                self.sync_errors.acl += 1
                log.warning("mirror %s: persisting the managed ACLs failed: %s", mirror_name, error.name)
                return False
        self.managed[mirror_name] = after
        return True

    async def _create(self, mirror_name: str, admin: Admin, missing: list[AclBinding]) -> None:
        if not missing:
            return
        errors: list[Exception]
        try:
            errors = [e for e in (await admin.create_acls(missing)).values() if e is not None]
        except Exception as exc:
            errors = [exc]
        if errors:
            self.sync_errors.acl += 1
            log.warning("mirror %s: creating ACLs failed: %s", mirror_name, ", ".join(sorted({str(e) for e in errors})))
        else:
            log.info("mirror %s: created %d ACL(s) from the source", mirror_name, len(missing))

    async def _delete(self, mirror_name: str, admin: Admin, stale: list[AclBinding]) -> bool:
        errors: list[Exception]
        try:
            errors = [e for e in (await admin.delete_acls(stale)).values() if e is not None]
        except Exception as exc:
            errors = [exc]
        if errors:
            self.sync_errors.acl += 1
            log.warning("mirror %s: deleting ACLs failed: %s", mirror_name, ", ".join(sorted({str(e) for e in errors})))
            return False
        log.info("mirror %s: deleted %d ACL(s) the source no longer has: %s", mirror_name, len(stale),
                 "; ".join(_describe(b) for b in stale))
        return True


def _describe(b: AclBinding) -> str:
    return (f"{_name(ResourceType, b.resource_type)}:{b.resource_name} {b.principal} "
            f"{_name(AclOperation, b.operation)} {_name(AclPermissionType, b.permission_type)}")
