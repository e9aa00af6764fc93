"""Source cluster id validation for fetching (KIP-1279 "MirrorMetadataManager": "the broker
validates that the source cluster ID has not changed ... This prevents silent data
corruption in case of misconfiguration or unintended source cluster replacement").

Every broker checks, each data plane pass and before any fetcher of the pass starts, the
cluster id its source connection reports for every mirror it leads partitions of. While it
differs from the id the controller recorded for the mirror (`mirror.source.cluster.id`) the
mirror is halted on this broker: its fetchers are removed and none is started (records of
another cluster must never be appended to a mirror topic); one ERROR line is logged when the
halt starts, one INFO line when the ids match again and fetching resumes. A source that
cannot be reached keeps the mirror's previous decision.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection

from kmirror.mirror.fetcher.source_endpoint import SourceCluster
from kmirror.mirror.lifecycle_ports import Concurrently
from kmirror.mirror.metadata_sync.topics_plan import cluster_id_mismatch

log = logging.getLogger(__name__)


class SourceClusterIdGuard:
    def __init__(self, recorded_cluster_id: Callable[[str], str],
                 source_for: Callable[[str], SourceCluster | None],
                 concurrently: Concurrently | None = None) -> None:
        """`concurrently`: how the mirrors' checks run together (None: one after the other);
        each is a round trip to its source, so a pass over many mirrors must not chain them."""
        self.recorded_cluster_id = recorded_cluster_id
        self.source_for = source_for
        self.concurrently = concurrently
        self.halted: dict[str, str] = {}
        """Halted mirror -> the cluster id its source reported."""

    def is_halted(self, mirror_name: str) -> bool:
        return mirror_name in self.halted

    async def check(self, led: Collection[str]) -> None:
        """`led`: the mirrors this broker leads partitions of."""
        for mirror_name in list(self.halted):
            if mirror_name not in led:
                del self.halted[mirror_name]
        checks = [self._check(mirror_name, source) for mirror_name in sorted(led)
                  if (source := self.source_for(mirror_name)) is not None]
        if self.concurrently is None:
            for one in checks:
                await one
        else:
            await self.concurrently(checks)

    async def _check(self, mirror_name: str, source: SourceCluster) -> None:
        try:
            observed = await source.cluster_id(refresh=True)
        except Exception as exc:
            log.debug("mirror %s: source cluster id unknown: %r", mirror_name, exc)
            return
        expected = self.recorded_cluster_id(mirror_name)
        if cluster_id_mismatch(expected, observed):
            if mirror_name not in self.halted:
                log.error("mirror %s: fetching halted: source cluster id is %s, the mirror was created with %s",
                          mirror_name, observed, expected)
            self.halted[mirror_name] = observed
        elif self.halted.pop(mirror_name, None) is not None:
            log.info("mirror %s: source cluster id %s matches again, fetching resumes", mirror_name, observed)
