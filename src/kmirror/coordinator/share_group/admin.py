"""ShareGroupDescribe over the coordinator core's share groups (Kafka
`ShareGroup.asDescribedGroup`)."""

from __future__ import annotations

from dataclasses import dataclass

from kmirror.coordinator.consumer_group.ports import GroupsCore
from kmirror.coordinator.share_group import assignor, records, state_records
from kmirror.coordinator.share_group.group import ShareGroupMember
from kmirror.protocol.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class DescribedShareGroup:
    group_id: str
    error: ErrorCode
    error_message: str | None = None
    state: str = "Dead"
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: tuple[ShareGroupMember, ...] = ()


def describe(core: GroupsCore, group_id: str) -> DescribedShareGroup:
    err = core.coordinator_error(group_id)
    if err is not None:
        return DescribedShareGroup(group_id, err)
    group = core.share_groups.get(group_id)
    if group is None:
        message = (f"Group {group_id} is not a share group." if group_id in core.groups or group_id in core.consumer_groups
                   else f"Group {group_id} not found.")
        return DescribedShareGroup(group_id, ErrorCode.group_id_not_found, message)
    return DescribedShareGroup(group_id, ErrorCode.none, None, str(group.state), group.group_epoch,
                               group.assignment_epoch, assignor.NAME,
                               tuple(group.members[m] for m in sorted(group.members)))


def delete(core: GroupsCore, group_id: str) -> tuple[ErrorCode, list[tuple[bytes, bytes | None]]]:
    """DeleteGroups of a share group: NON_EMPTY_GROUP while it has members; else it goes, and
    its share partitions' stored states are tombstoned (Kafka's DeleteShareGroupState)."""
    if core.share_groups[group_id].members:
        return ErrorCode.non_empty_group, []
    del core.share_groups[group_id]
    keys = [k for k in core.share_states if k.group_id == group_id]
    for key in keys:
        del core.share_states[key]
    return ErrorCode.none, [(state_records.encode_key(k), None) for k in keys] + [records.group_tombstone(group_id)]
