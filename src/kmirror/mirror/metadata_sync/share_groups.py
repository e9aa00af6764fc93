"""Share group offset sync (KIP-1279 "Share Group": "we retrieve the current SPSO for each
share group using the DescribeShareGroupOffsets API from the source cluster, and then we
update the SPSO in the destination cluster using the AlterShareGroupOffsets API").

For each mirror this broker coordinates, every refresh: ListGroups at the source, keep the
share groups whose id full-matches one of `mirror.groups.include`, DescribeShareGroupOffsets
their share-partition start offsets (SPSO), keep the partitions of the mirror's ACTIVE topics
that exist at the destination and that the source still lists under the mirror's topic id,
and AlterShareGroupOffsets those that differ at the destination. The offsets are the
destination's too (mirroring keeps them), so a share group's members go on at the
destination after a failover from where the source's group had acknowledged.

Rules:
- AlterShareGroupOffsets creates the group at the destination if needed; a group with
  members there (NON_EMPTY_GROUP) is its own: skipped, not an error;
- an id held by a consumer group at the destination (GROUP_ID_NOT_FOUND, as the KIP says)
  and any other failure count one ConsumerGroupOffsetSyncError and are retried at the next
  refresh;
- a source without share groups (no DescribeShareGroupOffsets, or none listed) syncs none.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from uuid import UUID

from kmirror.client.errors import KafkaError
from kmirror.config.mirror import MirrorConfig
from kmirror.metadata.image import MetadataImage
from kmirror.mirror.metadata_sync.coordination import active_topic_partitions
from kmirror.mirror.metadata_sync.groups import same_source_topics
from kmirror.mirror.metadata_sync.syncer import CoordinatedMirrorSync
from kmirror.protocol.errors import ErrorCode
from kmirror.types import TopicPartition

log = logging.getLogger(__name__)
SHARE_GROUP_TYPE = "share"


def share_offsets_to_alter(source: Mapping[TopicPartition, int], destination: Mapping[TopicPartition, int],
                           active: Mapping[str, int]) -> dict[TopicPartition, int]:
    """The source's start offsets of ACTIVE mirror topics' partitions that the destination does
    not hold yet (partitions without a start offset at the source are left out)."""
    return {tp: start for tp, start in sorted(source.items())
            if start >= 0 and tp.partition < active.get(tp.topic, 0) and destination.get(tp) != start}


class ShareGroupOffsetSync(CoordinatedMirrorSync):
    async def sync(self, image: MetadataImage, mirror_name: str, config: MirrorConfig) -> None:
        active = active_topic_partitions(image, mirror_name)
        if active:
            await self.sync_mirror(mirror_name, config, active, {t: image.topics[t].topic_id for t in active})

    async def sync_mirror(self, mirror_name: str, config: MirrorConfig, active: Mapping[str, int],
                          topic_ids: Mapping[str, UUID]) -> None:
        source = self.admins.source(mirror_name, config)
        destination = self.admins.destination()
        if destination is None:
            return
        try:
            group_ids = sorted(g.group_id for g in await source.list_groups()
                               if g.group_type == SHARE_GROUP_TYPE and config.is_group_included(g.group_id))
            if group_ids:
                active = same_source_topics(active, topic_ids, await source.describe_topics())
        except Exception as exc:
            if not (isinstance(exc, KafkaError) and exc.error_code == ErrorCode.unsupported_version):
                self.sync_errors.consumer_group_offset += 1
                log.warning("mirror %s: listing the source's share groups failed: %s", mirror_name, exc)
            return
        for group_id in group_ids:
            try:
                at_source = await source.list_share_group_offsets(group_id)
                try:
                    at_destination = await destination.list_share_group_offsets(group_id)
                except KafkaError as exc:
                    if exc.error_code != ErrorCode.group_id_not_found:
                        raise
                    at_destination = {}
                changes = share_offsets_to_alter(at_source, at_destination, active)
                if not changes:
                    continue
                results = await destination.alter_share_group_offsets(group_id, changes)
            except KafkaError as exc:
                if exc.error_code == ErrorCode.non_empty_group:
                    log.debug("mirror %s: share group %s has members at this cluster, not synced", mirror_name,
                              group_id)
                    continue
                self._failed(mirror_name, group_id, exc)
                continue
            except Exception as exc:  # a broker lost meanwhile: the next refresh syncs it
                self._failed(mirror_name, group_id, exc)
                continue
            errors = sorted({str(e) for e in results.values() if e is not None})
            if errors:
                self._failed(mirror_name, group_id, Exception(", ".join(errors)))

    def _failed(self, mirror_name: str, group_id: str, exc: Exception) -> None:
        self.sync_errors.consumer_group_offset += 1
        log.warning("mirror %s: syncing the offsets of share group %s failed: %s", mirror_name, group_id, exc)
