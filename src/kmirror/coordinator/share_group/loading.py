"""Share groups and share partition states as the group coordinator loads and unloads a
`__consumer_offsets` partition: replayed from their records (`records`, `state_records`),
assignments computed again at each group's epoch, every member's session started again."""

from __future__ import annotations

from collections.abc import Callable

from kmirror.coordinator.consumer_group.ports import TopicsView
from kmirror.coordinator.share_group import records, state_records
from kmirror.coordinator.share_group.group import ShareGroup
from kmirror.coordinator.share_group.heartbeat import reassign, subscribed_metadata
from kmirror.coordinator.share_group.state_records import ShareSnapshot, ShareStateKey


def load_partition(share_groups: dict[str, ShareGroup], share_states: dict[ShareStateKey, ShareSnapshot],
                   partition_records: list[records.Record], topics: TopicsView, session_deadline_ms: int) -> None:
    loaded = records.replay(partition_records)
    for group in loaded.values():
        group.subscribed_metadata = subscribed_metadata(group, topics)
        reassign(group, group.subscribed_metadata)
        for member_id in group.members:
            group.session_deadline_ms[member_id] = session_deadline_ms
    share_groups.update(loaded)
    share_states.update(state_records.replay(partition_records))


def unload_partition(share_groups: dict[str, ShareGroup], share_states: dict[ShareStateKey, ShareSnapshot],
                     in_partition: Callable[[str], bool]) -> None:
    """Forget the groups and states of the partition (`in_partition(group_id)`)."""
    for group_id in [g for g in share_groups if in_partition(g)]:
        del share_groups[group_id]
    for key in [k for k in share_states if in_partition(k.group_id)]:
        del share_states[key]
