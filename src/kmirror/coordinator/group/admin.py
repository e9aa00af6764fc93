"""ListGroups, DescribeGroups and DeleteGroups over the coordinator core's groups."""

from __future__ import annotations

from kmirror.coordinator.consumer_group import admin as consumer_admin
from kmirror.coordinator.consumer_group.state import parse_consumer_group_state
from kmirror.coordinator.group.coordinator import GroupCoordinator
from kmirror.coordinator.group.state import GroupState, parse_state
from kmirror.coordinator.offsets import replay
from kmirror.coordinator.partition_status import PartitionStatus
from kmirror.coordinator.results import (
    DeleteGroupResult,
    DeleteGroupsResult,
    DescribedGroup,
    DescribedMember,
    GroupOutput,
    ListedGroup,
    ListGroupsResult,
)
from kmirror.coordinator.share_group import admin as share_admin
from kmirror.protocol.errors import ErrorCode

E = ErrorCode


def list_groups(core: GroupCoordinator, states_filter: list[str], types_filter: list[str]) -> ListGroupsResult:
    """Groups of every loaded partition; COORDINATOR_LOAD_IN_PROGRESS while any loads.
    Filters match case-insensitively; types are `classic`, `consumer` (KIP-848) and `share`
    (KIP-932)."""
    error = E.none
    if any(s is PartitionStatus.LOADING for s in core.state.partitions.values()):
        error = E.coordinator_load_in_progress
    wanted_states = {str(parse_state(s) or parse_consumer_group_state(s)) for s in states_filter}
    types = {t.lower() for t in types_filter}
    listed: list[ListedGroup] = []
    if not types or "classic" in types:
        listed.extend(ListedGroup(g.group_id, g.protocol_type or "", str(g.state)) for g in core.groups.values())
    if not types or "consumer" in types:
        listed.extend(consumer_admin.listed(g) for g in core.consumer_groups.values())
    if not types or "share" in types:
        listed.extend(ListedGroup(g.group_id, "share", str(g.state), "share") for g in core.share_groups.values())
    groups = tuple(
        g for g in sorted(listed, key=lambda g: g.group_id)
        if core.coordinator_error(g.group_id) is None and (not states_filter or g.state in wanted_states)
    )
    return ListGroupsResult(error, groups)


def describe_group(core: GroupCoordinator, group_id: str, *, missing_is_error: bool) -> DescribedGroup:
    """Kafka `ClassicGroup.describe`: member metadata and the protocol only when Stable.
    An unknown group is Dead with no error, or GROUP_ID_NOT_FOUND from v6 (KIP-1043)."""
    err = core.coordinator_error(group_id)
    if err is not None:
        return DescribedGroup(group_id, err)
    group = core.groups.get(group_id)
    if group is None or group.is_in(GroupState.DEAD):
        return DescribedGroup(group_id, E.group_id_not_found if missing_is_error else E.none)
    stable = group.is_in(GroupState.STABLE)
    members = tuple(
        DescribedMember(
            m.member_id, m.group_instance_id, m.client_id, m.client_host,
            m.metadata_for(group.protocol_name) if stable else b"",
            m.assignment if stable else b"",
        )
        for m in group.members.values()
    )
    return DescribedGroup(
        group_id, E.none, str(group.state), group.protocol_type or "",
        (group.protocol_name or "") if stable else "", members,
    )


def delete_groups(core: GroupCoordinator, request_id: int, group_ids: list[str]) -> GroupOutput:
    """DeleteGroups: only Empty groups (NON_EMPTY_GROUP otherwise), share groups too. The group's offsets and
    metadata are tombstoned; the shell answers after executing the appends (GroupOutput order)."""
    out = GroupOutput()
    results: list[DeleteGroupResult] = []
    for group_id in group_ids:
        err = core.coordinator_error(group_id)
        if err is None and group_id in core.share_groups:
            err, records = share_admin.delete(core, group_id)
            results.append(DeleteGroupResult(group_id, err))
            if records:
                out.extend(core.append(group_id, records, GroupOutput, lambda _e: GroupOutput()))
            continue
        if err is None and group_id in core.consumer_groups:
            err, records = consumer_admin.delete(core, group_id)
            results.append(DeleteGroupResult(group_id, err))
            if records:
                out.extend(core.append(group_id, records, GroupOutput, lambda _e: GroupOutput()))
            continue
        group = core.groups.get(group_id)
        if err is None and (group is None or group.is_in(GroupState.DEAD)):
            err = E.group_id_not_found
        if err is None and group is not None and not group.is_in(GroupState.EMPTY):
            err = E.non_empty_group
        if err is not None or group is None:
            results.append(DeleteGroupResult(group_id, err or E.group_id_not_found))
            continue
        records = [replay.offset_commit_record(group_id, tp, None) for tp in sorted(group.offsets)]
        records.append(replay.group_tombstone(group_id))
        group.transition_to(GroupState.DEAD, core.clock.now_ms())
        del core.groups[group_id]
        results.append(DeleteGroupResult(group_id, E.none))
        out.extend(core.append(group_id, records, GroupOutput, lambda _e: GroupOutput()))
    out.responses.append((request_id, DeleteGroupsResult(tuple(results))))
    return out
