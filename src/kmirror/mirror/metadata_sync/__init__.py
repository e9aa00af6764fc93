"""KIP-1279 MirrorMetadataManager periodic sync of the mirrors this broker coordinates for
metadata. `MetadataSync` runs its syncers in order, once per data plane pass; one that
fails does not keep the next from running (each counts its own failures in
`MirrorSyncErrors`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

log = logging.getLogger(__name__)


class MetadataSyncer(Protocol):
    async def run_once(self) -> None: ...


@runtime_checkable
class ClosableSyncer(Protocol):
    async def close(self) -> None: ...


class MetadataSync:
    def __init__(self, syncers: Iterable[MetadataSyncer] = ()) -> None:
        self.syncers: list[MetadataSyncer] = list(syncers)

    async def run_once(self) -> None:
        for syncer in self.syncers:
            try:
                await syncer.run_once()
            except Exception:
                log.exception("mirror metadata sync %s failed", type(syncer).__name__)

    async def close(self) -> None:
        """Closes the connections of the syncers that hold some (`close`)."""
        for syncer in self.syncers:
            if isinstance(syncer, ClosableSyncer):
                try:
                    await syncer.close()
                except Exception as exc:  # a broken connection is closed as far as it can be
                    log.debug("closing mirror metadata sync %s: %r", type(syncer).__name__, exc)
