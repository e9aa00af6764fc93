"""Topics that join a mirror by pattern (`mirror.topics.include`; beyond KIP-1279, as
MirrorMaker 2's `topics` regex list), and with them the KIP's topic creation ("If a topic
exists in the source but not the destination, the manager sends a CreateTopics request to
the controller with identical partition count and configurations").

For each mirror this broker coordinates whose `mirror.topics.include` is not empty, every
refresh: list the source's topics (Metadata), keep those `MirrorConfig.is_topic_included`
selects and the destination does not have under that name, and send AddTopicsToMirror for
them to the destination, as `kmirror mirrors --add` would. The destination then creates
each with the source's topic id, partition count and configs (minus
`mirror.topic.properties.exclude`) and the destination's `default.replication.factor`, and
the mirror partitions start as for any added topic.

Decisions:
- a name the destination already has is never added by pattern, whatever the topic is: a
  destination topic of its own, a topic failed over (REMOVED) or STOPPED after its source
  topic was deleted. Turning an existing topic into a read-only mirror topic is the
  operator's `--add`;
- a topic the source deletes and re-creates keeps its destination topic (STOPPED, see
  "Source topic deletion"), so the new one is not added either;
- a refusal (e.g. INVALID_REPLICATION_FACTOR) counts one TopicConfigMetadataSyncError and is logged
  once per topic and error, then retried quietly every refresh; a source that cannot be
  listed counts one MetadataRefreshError.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable

from kmirror.config.mirror import MirrorConfig
from kmirror.metadata.image import MetadataImage
from kmirror.mirror.metadata_sync.admins import SyncAdmins
from kmirror.mirror.metadata_sync.syncer import CoordinatedMirrorSync
from kmirror.mirror.sync_errors import MirrorSyncErrors

log = logging.getLogger(__name__)


def topics_to_add(config: MirrorConfig, source_topics: Iterable[str], destination_topics: Collection[str]) -> list[str]:
    """The source topics that join the mirror by pattern: included, absent at the destination."""
    return sorted({t for t in source_topics if t not in destination_topics and config.is_topic_included(t)})


class TopicAutoAdd(CoordinatedMirrorSync):
    def __init__(self, broker_id: int, image: Callable[[], MetadataImage | None], admins: SyncAdmins,
                 sync_errors: MirrorSyncErrors, is_halted: Callable[[str], bool] = lambda mirror_name: False) -> None:
        super().__init__(broker_id, image, admins, sync_errors, is_halted)
        self.refused: dict[tuple[str, str], str] = {}
        """(mirror, topic) -> the last refusal logged for it."""

    async def sync(self, image: MetadataImage, mirror_name: str, config: MirrorConfig) -> None:
        if not config.topics_include:
            return
        admin = self.admins.destination()
        if admin is None:
            return
        try:
            listed = await self.admins.source(mirror_name, config).list_topics()
        except Exception as exc:  # the source is unreachable: retried next refresh
            self.sync_errors.metadata_refresh += 1
            log.warning("mirror %s: listing the source's topics failed: %s", mirror_name, exc)
            return
        new = topics_to_add(config, listed, image.topics)
        if not new:
            return
        try:
            results = await admin.add_topics_to_mirror(mirror_name, new)
        except Exception as exc:
            self.sync_errors.topic_config += 1
            log.warning("mirror %s: adding topics matching mirror.topics.include failed: %s", mirror_name, exc)
            return
        added = sorted(t for t, e in results.items() if e is None)
        if added:
            log.info("mirror %s: added topic(s) matching mirror.topics.include: %s", mirror_name, ", ".join(added))
        for topic, error in sorted(results.items()):
            if error is None:
                self.refused.pop((mirror_name, topic), None)
                continue
            self.sync_errors.topic_config += 1
            if self.refused.get((mirror_name, topic)) != str(error):
                log.warning("mirror %s: topic %s matches mirror.topics.include but was not added: %s",
                            mirror_name, topic, error)
                self.refused[(mirror_name, topic)] = str(error)
