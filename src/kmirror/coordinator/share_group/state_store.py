"""Share partition states on the group coordinator (the work of Kafka's share coordinator,
`ShareCoordinatorShard`): ReadShareGroupState and WriteShareGroupState for the share
partition leaders.

A state is the whole snapshot of a share partition (start offset and state batches), written
by its leader after each change; the coordinator of the group's `__consumer_offsets`
partition stores it there (`state_records`). A write from a leader epoch older than the
stored one is FENCED_LEADER_EPOCH, one with an older state epoch FENCED_STATE_EPOCH (a reset
of the group's offsets moves the state epoch); a write is visible once appended.
"""

from __future__ import annotations

from dataclasses import dataclass

from kmirror.coordinator.consumer_group.ports import GroupsCore
from kmirror.coordinator.results import GroupOutput
from kmirror.coordinator.share_group import state_records
from kmirror.coordinator.share_group.state_records import ShareSnapshot, ShareStateKey
from kmirror.protocol.errors import ErrorCode

E = ErrorCode


@dataclass(frozen=True, slots=True)
class ShareStateWritten:
    error: ErrorCode


def read(core: GroupsCore, key: ShareStateKey) -> ShareSnapshot | None | ErrorCode:
    """The stored state, None when the partition has none yet, or the coordinator error."""
    return core.coordinator_error(key.group_id) or core.share_states.get(key)


_DELIVERY_STATES = frozenset({0, 1, 2, 4})  # AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED
# A share partition's in-flight window spans at most `group.share.partition.max.record.locks`
# offsets and one record batch: a state spanning more is no share partition's, and a leader
# loading it would walk every offset.
MAX_STATE_SPAN = 1_000_000


def invalid(key: ShareStateKey, snapshot: ShareSnapshot) -> ErrorCode | None:
    """INVALID_REQUEST for a state no share partition could have (Kafka
    `ShareCoordinatorShard`'s checks): no group, a negative partition or start offset, or a
    state batch out of order, empty, below the start offset or of an unknown state, or batches
    spanning more than `MAX_STATE_SPAN` offsets."""
    if not key.group_id or key.partition < 0 or snapshot.start_offset < 0:
        return E.invalid_request
    if snapshot.state_batches and snapshot.state_batches[-1][1] - snapshot.start_offset >= MAX_STATE_SPAN:
        return E.invalid_request
    previous = snapshot.start_offset - 1
    for first, last, state, count in snapshot.state_batches:
        if first <= previous or last < first or state not in _DELIVERY_STATES or count < 0:
            return E.invalid_request
        previous = last
    return None


def write(core: GroupsCore, request_id: int, key: ShareStateKey, snapshot: ShareSnapshot) -> GroupOutput:
    """Append the snapshot and answer once it is stored (`ShareStateWritten`)."""

    def reply(error: ErrorCode) -> GroupOutput:
        return GroupOutput(responses=[(request_id, ShareStateWritten(error))])

    error = invalid(key, snapshot) or core.coordinator_error(key.group_id)
    stored = core.share_states.get(key)
    if error is None and stored is not None:
        if snapshot.leader_epoch < stored.leader_epoch:
            error = E.fenced_leader_epoch
        elif snapshot.state_epoch < stored.state_epoch:
            error = E.fenced_state_epoch
    if error is not None:
        return reply(error)

    def stored_now() -> GroupOutput:
        core.share_states[key] = snapshot
        return reply(E.none)

    record = (state_records.encode_key(key), state_records.encode_value(snapshot))
    return core.append(key.group_id, [record], stored_now, reply)
