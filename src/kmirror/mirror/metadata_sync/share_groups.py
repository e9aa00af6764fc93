"""Share group offset sync (KIP-1279 "Share Group": "we retrieve the current SPSO for each
share group using the DescribeShareGroupOffsets API from the source cluster, and then we
update the SPSO in the destination cluster using the AlterShareGroupOffsets API").

For each mirror this broker coordinates, every refresh, with the consumer group sync
(`groups.GroupOffsetSync`, whose ListGroups at the source lists them too): keep the share
groups whose id full-matches one of `mirror.groups.include`, DescribeShareGroupOffsets
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
- a source without share groups (none listed) syncs none.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from kmirror.client.admin import Admin
from kmirror.client.errors import KafkaError
from kmirror.client.groups import ListedGroup
from kmirror.config.mirror import MirrorConfig
from kmirror.mirror.sync_errors import MirrorSyncErrors
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


def share_groups_to_sync(config: MirrorConfig, listed: Iterable[ListedGroup]) -> list[str]:
    """The source's share groups whose offsets are mirrored, sorted."""
    return sorted(g.group_id for g in listed if g.group_type == SHARE_GROUP_TYPE and config.is_group_included(g.group_id))


async def sync_share_groups(sync_errors: MirrorSyncErrors, mirror_name: str, source: Admin, destination: Admin,
                            group_ids: Iterable[str], active: Mapping[str, int]) -> None:
    """One refresh of the share groups `group_ids` of the mirror's source (listed by the
    consumer group sync's ListGroups), onto the mirror's ACTIVE topics `active`."""
    def failed(group_id: str, exc: Exception) -> None:
        sync_errors.consumer_group_offset += 1
        log.warning("mirror %s: syncing the offsets of share group %s failed: %s", mirror_name, group_id, exc)

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
                log.debug("mirror %s: share group %s has members at this cluster, not synced", mirror_name, group_id)
                continue
            failed(group_id, exc)
            continue
        except Exception as exc:  # a broker lost meanwhile: the next refresh syncs it
            failed(group_id, exc)
            continue
        errors = sorted({str(e) for e in results.values() if e is not None})
        if errors:
            failed(group_id, Exception(", ".join(errors)))
