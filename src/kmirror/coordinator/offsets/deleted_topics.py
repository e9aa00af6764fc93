"""Committed offsets of deleted topics (Kafka `GroupCoordinatorShard.onPartitionsDeleted`,
`OffsetMetadataManager.onPartitionsDeleted`): when the metadata image drops a topic, every
group this coordinator holds loses its committed offsets of that topic at once, each with its
tombstone in `__consumer_offsets`.

Without it those offsets stayed until offset expiry, and a topic re-created under the same
name met them: a group resumed the new topic at the old one's position and skipped its first
records (or was reset by OFFSET_OUT_OF_RANGE). A group left without offsets stays as it is:
expiration deletes it once empty, as Kafka does.

Offsets of a transaction still open on the deleted topic are dropped from memory too, so its
commit does not bring them back; they are not tombstoned (their records commit or abort with
the transaction), so a coordinator that loads the partition after that commit sees them again
until they expire.
"""

from __future__ import annotations

from collections.abc import Collection

from kmirror.coordinator.consumer_group.group import ConsumerGroup
from kmirror.coordinator.group.group import ClassicGroup
from kmirror.coordinator.offsets import replay
from kmirror.coordinator.offsets.expiration import MAX_RECORDS_PER_APPEND, ExpiringCore, Records
from kmirror.coordinator.results import GroupOutput


def delete_offsets_of(core: ExpiringCore, topics: Collection[str], loaded: Collection[int]) -> GroupOutput:
    """The tombstones of every committed offset of `topics`, per `__consumer_offsets` partition
    of `loaded` (those this coordinator holds), the offsets gone from memory already."""
    by_partition: dict[int, Records] = {}
    groups: dict[str, ClassicGroup | ConsumerGroup] = {**core.state.groups, **core.state.consumer_groups}
    for group_id, group in sorted(groups.items()):
        partition = core.partition_for(group_id)
        if partition not in loaded:
            continue
        gone = sorted(tp for tp in group.offsets if tp.topic in topics)
        for tp in gone:
            del group.offsets[tp]
        by_partition.setdefault(partition, []).extend(replay.offset_commit_record(group_id, tp, None) for tp in gone)
    for group_id, by_producer in core.state.pending_txn_offsets.items():
        if core.partition_for(group_id) in loaded:
            for pending in by_producer.values():
                for tp in [tp for tp in pending if tp.topic in topics]:
                    del pending[tp]
    out = GroupOutput()
    for partition, records in sorted(by_partition.items()):
        for start in range(0, len(records), MAX_RECORDS_PER_APPEND):
            out.extend(core.append_to_partition(partition, records[start:start + MAX_RECORDS_PER_APPEND],
                                                GroupOutput, lambda _e: GroupOutput()))
    return out
