"""The topic metadata sync runner (KIP-1279 "MirrorMetadataManager"), one pass per
`mirror.metadata.refresh.interval.ms` of the mirror data plane.

Runs only for the mirrors this broker coordinates for metadata: the leader of `__mirror_state`
partition `Utils.abs(mirrorName.hashCode()) % numPartitions` (KIP: "Only the broker assigned
as the metadata coordinator for a given mirror performs synchronization"), so it is done once
per cluster. Per mirror: describe the mirror's ACTIVE topics at the source (cluster id,
partition count, dynamic topic configs), `plan_topic_sync`, then write the plan through the
controller. Failures are counted in `MirrorSyncErrors` (source unreachable or reporting
another cluster id: `metadata_refresh`; a refused CreatePartitions or
IncrementalAlterConfigs: `topic_config`) and retried next pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kmirror.config.mirror import MIRROR_STATE_TOPIC, InvalidMirrorConfig, MirrorConfig
from kmirror.kip1279.membership import MembershipStatus
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.mirrors import MirrorInfo, mirror_topics, mirrors
from kmirror.mirror.coordinator.partitioner import metadata_partition_for
from kmirror.mirror.metadata_sync.destination import TopicMetadataWriter
from kmirror.mirror.metadata_sync.topics_plan import (
    AlterTopicConfigs,
    CreatePartitions,
    DestinationTopic,
    HaltSync,
    MirrorTopicsView,
    plan_topic_sync,
)
from kmirror.mirror.source_lookup import SourceLookup
from kmirror.mirror.sync_errors import MirrorSyncErrors

log = logging.getLogger(__name__)


def coordinates_metadata(image: MetadataImage, broker_id: int, mirror_name: str) -> bool:
    """This broker leads the mirror's metadata `__mirror_state` partition."""
    topic = image.topics.get(MIRROR_STATE_TOPIC)
    if topic is None or not topic.partitions:
        return False
    partition = topic.partitions.get(metadata_partition_for(mirror_name, len(topic.partitions)))
    return partition is not None and partition.leader == broker_id


def mirror_topics_view(image: MetadataImage, info: MirrorInfo, config: MirrorConfig) -> MirrorTopicsView:
    topics: dict[str, DestinationTopic] = {}
    for name, membership in mirror_topics(image, info.name).items():
        if membership.status is not MembershipStatus.ACTIVE:
            continue
        topic = image.topics[name]
        configs = {k: v for k, v in image.topic_config(name).items() if v is not None}
        topics[name] = DestinationTopic(topic.topic_id, len(topic.partitions), configs)
    return MirrorTopicsView(info.name, info.source_cluster_id, config, topics)


class TopicMetadataSync:
    def __init__(self, broker_id: int, image: Callable[[], MetadataImage | None], lookup: SourceLookup,
                 writer: TopicMetadataWriter, sync_errors: MirrorSyncErrors) -> None:
        self.broker_id = broker_id
        self.image = image
        self.lookup = lookup
        self.writer = writer
        self.sync_errors = sync_errors
        self.halted: dict[str, HaltSync] = {}
        """Mirrors whose source reported another cluster id at the last attempt."""

    async def run_once(self) -> None:
        image = self.image()
        if image is None:
            return
        for name, info in mirrors(image).items():
            if not coordinates_metadata(image, self.broker_id, name):
                self.halted.pop(name, None)
                continue
            config = info.parsed()
            if isinstance(config, InvalidMirrorConfig):
                continue
            view = mirror_topics_view(image, info, config)
            if view.topics:
                await self._sync(view)

    async def _sync(self, view: MirrorTopicsView) -> None:
        name = view.mirror_name
        try:
            source = await self.lookup(name, view.config, sorted(view.topics))
        except Exception as exc:  # the source is unreachable: retried next pass
            self.sync_errors.metadata_refresh += 1
            log.warning("mirror %s: metadata refresh from the source failed: %s", name, exc)
            return
        plan = plan_topic_sync(view, source)
        if plan.halt is not None:
            self.sync_errors.metadata_refresh += 1
            if name not in self.halted:
                log.error("mirror %s: metadata sync halted: %s", name, plan.halt.reason)
            self.halted[name] = plan.halt
            return
        if self.halted.pop(name, None) is not None:
            log.info("mirror %s: source cluster id matches again, metadata sync resumed", name)
        for action in plan.actions:
            try:
                if isinstance(action, CreatePartitions):
                    error = await self.writer.create_partitions(action.topic, action.count)
                    what = f"CreatePartitions {action.topic} to {action.count}"
                else:
                    assert isinstance(action, AlterTopicConfigs)
                    error = await self.writer.alter_configs(action.topic, action.ops)
                    what = f"IncrementalAlterConfigs {action.topic} " + ", ".join(
                        f"{o.op.name} {o.name}" for o in action.ops)
            except Exception as exc:  # the controller is unreachable: retried next pass
                self.sync_errors.topic_config += 1
                log.warning("mirror %s: topic metadata sync failed: %r", name, exc)
                continue
            if error.code != 0:
                self.sync_errors.topic_config += 1
                log.warning("mirror %s: %s refused: %s %s", name, what, error.code.name, error.message or "")
            else:
                log.info("mirror %s: %s", name, what)
