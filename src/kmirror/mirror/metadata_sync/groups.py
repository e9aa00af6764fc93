"""Consumer group offset sync (KIP-1279 "MirrorMetadataManager": "Cluster Mirroring
synchronizes consumer group offsets").

For each mirror this broker coordinates, every refresh: ListGroups at the source, keep the
consumer groups (protocol type `consumer`: classic groups of the consumer protocol and KIP-848
consumer groups, which ListGroups reports with that protocol type too; or none: offsets
committed without membership)
whose id full-matches one of `mirror.groups.include`, OffsetFetch their committed offsets,
keep the partitions of the mirror's ACTIVE topics that exist at the destination and that the
source still lists under the mirror's topic id (a re-created source topic's offsets are
positions in another topic), and commit
those that differ from the destination's (offset, leader epoch or metadata) with Kafka's
admin commit (generation -1, no member) at the destination's group coordinator. The share
groups the same ListGroups lists have their start offsets synced too (`share_groups`).

Rules:
- source offsets and leader epochs are the destination's (mirroring keeps both), so they
  are committed as they are, also beyond the destination's log end offset (the KIP accepts
  it: a consumer there waits for the data, or resets with `auto.offset.reset`);
- a group with members at the destination is its own (the coordinator refuses an admin
  commit: UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, REBALANCE_IN_PROGRESS): skipped, not an
  error;
- any other failure (a request, a partition's commit) counts one
  ConsumerGroupOffsetSyncError for the group and is retried on the next refresh.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from uuid import UUID

from kmirror.client.admin import TopicDescription
from kmirror.client.errors import KafkaError
from kmirror.client.groups import ListedGroup, OffsetAndMetadata
from kmirror.config.mirror import MirrorConfig
from kmirror.metadata.image import MetadataImage
from kmirror.mirror.metadata_sync.admins import SyncAdmins
from kmirror.mirror.metadata_sync.coordination import active_topic_partitions
from kmirror.mirror.metadata_sync.share_groups import share_groups_to_sync, sync_share_groups
from kmirror.mirror.metadata_sync.syncer import CoordinatedMirrorSync
from kmirror.mirror.source_topic import NO_TOPIC_ID, check_source_topic
from kmirror.mirror.sync_errors import MirrorSyncErrors
from kmirror.ports import Clock
from kmirror.protocol.errors import ErrorCode
from kmirror.types import TopicPartition

log = logging.getLogger(__name__)

DEFAULT_OFFSETS_RETENTION_MS = 10080 * 60_000  # Kafka's offsets.retention.minutes default
CONSUMER_PROTOCOL_TYPES = frozenset({"consumer", ""})
GROUP_ACTIVE_ERRORS = frozenset({int(ErrorCode.unknown_member_id), int(ErrorCode.illegal_generation),
                                 int(ErrorCode.rebalance_in_progress)})

Offsets = Mapping[TopicPartition, OffsetAndMetadata]


def groups_to_sync(config: MirrorConfig, listed: Iterable[ListedGroup]) -> list[str]:
    """The source groups whose offsets are mirrored, sorted."""
    return sorted(g.group_id for g in listed
                  if g.protocol_type in CONSUMER_PROTOCOL_TYPES and config.is_group_included(g.group_id))


def mirrored_offsets(source: Offsets, active_partitions: Mapping[str, int]) -> dict[TopicPartition, OffsetAndMetadata]:
    """The source offsets of partitions of ACTIVE mirror topics that exist at the destination."""
    return {tp: om for tp, om in source.items() if tp.partition < active_partitions.get(tp.topic, 0)}


def same_source_topics(active: Mapping[str, int], topic_ids: Mapping[str, UUID],
                       listed: Mapping[str, TopicDescription]) -> dict[str, int]:
    """The mirror topics the source still holds under the mirror's topic id (`listed`: the
    source's topic descriptions by name): offsets committed on a re-created source topic
    are positions in another topic and are never synced onto the mirrored one."""
    def listed_id(name: str) -> UUID | None:
        desc = listed.get(name)
        return None if desc is None else (desc.topic_id or NO_TOPIC_ID)

    return {t: n for t, n in active.items() if check_source_topic(topic_ids[t], listed_id(t)).same}


def offsets_to_commit(mirrored: Offsets, destination: Offsets) -> dict[TopicPartition, OffsetAndMetadata]:
    """The mirrored offsets the destination does not have yet (or has differently)."""
    return {tp: om for tp, om in sorted(mirrored.items()) if destination.get(tp) != om}


class GroupOffsetSync(CoordinatedMirrorSync):
    """The syncer of consumer group offsets (of the mirror's ACTIVE topics only).

    The destination holds a synced group as a group without members, whose offsets expire
    `offsets.retention.minutes` after their commit (KIP-211). A source group whose offsets do
    not move (a stable group on a quiet topic) would lose them at the destination until the
    next pass commits them again: a failover in between finds no offsets. So every
    `recommit_after_ms` (half the destination's retention) a group's mirrored offsets are
    committed again even when unchanged, and at the first pass after a start."""

    def __init__(self, broker_id: int, image: Callable[[], MetadataImage | None], admins: SyncAdmins,
                 sync_errors: MirrorSyncErrors, is_halted: Callable[[str], bool] = lambda mirror_name: False, *,
                 clock: Clock, recommit_after_ms: int = DEFAULT_OFFSETS_RETENTION_MS // 2) -> None:
        super().__init__(broker_id, image, admins, sync_errors, is_halted)
        self.clock = clock
        self.recommit_after_ms = recommit_after_ms
        self._committed_at: dict[tuple[str, str], int] = {}
        self._unsupported: set[str] = set()
        """Mirrors whose source lacks ListGroups (said once; not an error each pass)."""
        """(mirror, group) -> when this syncer last committed the group's mirrored offsets."""

    async def sync(self, image: MetadataImage, mirror_name: str, config: MirrorConfig) -> None:
        active = active_topic_partitions(image, mirror_name)
        if active:
            await self.sync_mirror(mirror_name, config, active, {t: image.topics[t].topic_id for t in active})

    async def sync_mirror(self, mirror_name: str, config: MirrorConfig, active: Mapping[str, int],
                          topic_ids: Mapping[str, UUID] | None = None) -> None:
        source = self.admins.source(mirror_name, config)
        destination = self.admins.destination()
        if destination is None:
            return
        try:
            listed = await source.list_groups()
            group_ids, share_ids = groups_to_sync(config, listed), share_groups_to_sync(config, listed)
            if topic_ids:
                active = same_source_topics(active, topic_ids, await source.describe_topics())
        except Exception as exc:
            if isinstance(exc, KafkaError) and exc.error_code == ErrorCode.unsupported_version:
                # a source without ListGroups (not a consumer API): no group to sync, said once
                if mirror_name not in self._unsupported:
                    self._unsupported.add(mirror_name)
                    log.warning("mirror %s: no consumer group offsets are synced: %s", mirror_name, exc)
                return
            self.sync_errors.consumer_group_offset += 1
            log.warning("mirror %s: listing the source's consumer groups failed: %s", mirror_name, exc)
            return
        self._unsupported.discard(mirror_name)
        if share_ids:
            await sync_share_groups(self.sync_errors, mirror_name, source, destination, share_ids, active)
        if not group_ids:
            return
        try:
            at_source = await source.list_consumer_groups_offsets(group_ids)
            mirrored = {g: m for g, offsets in at_source.items()
                        if not isinstance(offsets, KafkaError) and (m := mirrored_offsets(offsets, active))}
            at_destination = await destination.list_consumer_groups_offsets(mirrored) if mirrored else {}
        except Exception as exc:
            self.sync_errors.consumer_group_offset += 1
            log.warning("mirror %s: fetching the consumer groups' offsets failed: %s", mirror_name, exc)
            return
        for group_id, offsets in at_source.items():
            if isinstance(offsets, KafkaError):
                self._failed(mirror_name, group_id, offsets)
        commits = {g: c for g, m in mirrored.items() if (c := self._commits(mirror_name, g, m, at_destination.get(g, {})))}
        now = self.clock.monotonic_ms()
        try:
            results = await destination.alter_consumer_groups_offsets(commits) if commits else {}
        except Exception as exc:  # a destination broker lost meanwhile: the next pass commits them
            self.sync_errors.consumer_group_offset += 1
            log.warning("mirror %s: committing the consumer groups' offsets at this cluster failed: %s", mirror_name,
                        exc)
            return
        for group_id, result in results.items():
            self._committed(mirror_name, group_id, result, now)

    def _commits(self, mirror_name: str, group_id: str, mirrored: Offsets,
                 at_destination: Offsets | KafkaError) -> Offsets:
        """What to commit of a group: the mirrored offsets that differ, or all of them when the
        last commit is older than `recommit_after_ms` (refreshed before the destination's
        retention); none while the destination's offsets cannot be read."""
        if isinstance(at_destination, KafkaError):
            self._failed(mirror_name, group_id, at_destination)
            return {}
        last = self._committed_at.get((mirror_name, group_id))
        if last is None or self.clock.monotonic_ms() - last >= self.recommit_after_ms:
            return dict(sorted(mirrored.items()))
        return offsets_to_commit(mirrored, at_destination)

    def _failed(self, mirror_name: str, group_id: str, exc: Exception) -> None:
        self.sync_errors.consumer_group_offset += 1
        log.warning("mirror %s: syncing the offsets of group %s failed: %s", mirror_name, group_id, exc)

    def _committed(self, mirror_name: str, group_id: str,
                   result: Mapping[TopicPartition, KafkaError | None] | Exception, now: int) -> None:
        if isinstance(result, Exception):
            self._failed(mirror_name, group_id, result)
            return
        errors = [e for e in result.values() if e is not None]
        if any(e.error_code in GROUP_ACTIVE_ERRORS for e in errors):
            log.debug("mirror %s: group %s has members at the destination, not synced", mirror_name, group_id)
        elif errors:
            self.sync_errors.consumer_group_offset += 1
            log.warning("mirror %s: committing the offsets of group %s failed: %s", mirror_name, group_id,
                        ", ".join(sorted({str(e) for e in errors})))
        else:
            self._committed_at[(mirror_name, group_id)] = now
