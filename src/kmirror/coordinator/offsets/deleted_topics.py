"""Committed offsets of deleted topics (Kafka `GroupCoordinatorShard.onPartitionsDeleted`,
`OffsetMetadataManager.onPartitionsDeleted`): when the metadata image drops a topic, every
group this coordinator holds loses its committed offsets of that topic at once, each with its
tombstone in `__consumer_offsets`.

Without it those offsets stayed until offset expiry, and a topic re-created under the same
name met them: a group resumed the new topic at the old one's position and skipped its first
records (or was reset by OFFSET_OUT_OF_RANGE). A group left without offsets stays as it is:
expiration deletes it once empty, as Kafka does.

Offsets of a transaction still open on the deleted topic go too, with the same tombstone
(Kafka writes one when the offset is committed or pending): written outside the transaction,
it removes the transaction's commit of that offset, in memory now and when the partition is
loaded again, so the transaction's COMMIT marker does not bring the offset back.

Share groups' stored share partition states of topics the image no longer has (by topic id)
are tombstoned the same way (Kafka deletes a deleted topic's share state).
"""

from __future__ import annotations

from collections.abc import Collection

from kmirror.coordinator.consumer_group.group import ConsumerGroup
from kmirror.coordinator.group.group import ClassicGroup
from kmirror.coordinator.offsets import replay
from kmirror.coordinator.offsets.expiration import MAX_RECORDS_PER_APPEND, ExpiringCore, Records
from kmirror.coordinator.results import GroupOutput
from kmirror.coordinator.share_group import state_records


def delete_offsets_of(core: ExpiringCore, topics: Collection[str], loaded: Collection[int]) -> GroupOutput:
    """The tombstones of every offset of `topics`, committed or pending in an open transaction,
    per `__consumer_offsets` partition of `loaded` (those this coordinator holds), the offsets
    gone from memory already."""
    by_partition: dict[int, Records] = {}
    state = core.state
    groups: dict[str, ClassicGroup | ConsumerGroup] = {**state.groups, **state.consumer_groups}
    for group_id in sorted(groups.keys() | state.pending_txn_offsets.keys()):
        partition = core.partition_for(group_id)
        if partition not in loaded:
            continue
        committed = groups[group_id].offsets if group_id in groups else {}
        pending = state.pending_txn_offsets.get(group_id, {}).values()
        gone = sorted({tp for tp in committed if tp.topic in topics}
                      | {tp for offsets in pending for tp in offsets if tp.topic in topics})
        for tp in gone:
            committed.pop(tp, None)
            replay.remove_pending_transactional_offset(state.pending_txn_offsets, group_id, tp)
        by_partition.setdefault(partition, []).extend(replay.offset_commit_record(group_id, tp, None) for tp in gone)
    live = {info.topic_id for info in core.topics().values()}
    for key in sorted((k for k in state.share_states if k.topic_id not in live
                       and core.partition_for(k.group_id) in loaded), key=str):
        del state.share_states[key]
        by_partition.setdefault(core.partition_for(key.group_id), []).append((state_records.encode_key(key), None))
    out = GroupOutput()
    for partition, records in sorted(by_partition.items()):
        for start in range(0, len(records), MAX_RECORDS_PER_APPEND):
            out.extend(core.append_to_partition(partition, records[start:start + MAX_RECORDS_PER_APPEND],
                                                GroupOutput, lambda _e: GroupOutput()))
    return out
