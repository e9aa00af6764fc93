"""Reconciliation of one member towards its target assignment (Kafka `CurrentAssignmentBuilder`).

The invariant it keeps: a partition is given to a member only when no other member owns it
(assigned or pending revocation). A member that must give partitions up is told to revoke
them first and stays at its epoch until a heartbeat shows it no longer owns them; only then
does it move to the target epoch and get the partitions that are free.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from kmirror.coordinator.consumer_group.member import ConsumerGroupMember, TopicPartitions
from kmirror.coordinator.consumer_group.state import MemberState, member_transition

# (topic id, partition) -> the member id owning it, None when free
OwnerOf = Callable[[uuid.UUID, int], str | None]


def next_assignment(
    member: ConsumerGroupMember,
    target_epoch: int,
    target: TopicPartitions,
    owner_of: OwnerOf,
    owned_in_request: TopicPartitions | None,
) -> ConsumerGroupMember:
    """The member after this heartbeat's reconciliation step. `owned_in_request` is the
    request's TopicPartitions (None when the member did not send them)."""
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned_in_request, member.pending_revocation):
            return member  # still revoking: nothing new until it has let go
        return _compute(member, target_epoch, target, owner_of, owned_in_request)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _compute(member, target_epoch, target, owner_of, owned_in_request)
    if member.member_epoch != target_epoch:
        return _compute(member, target_epoch, target, owner_of, owned_in_request)
    return member


def _compute(
    member: ConsumerGroupMember, target_epoch: int, target: TopicPartitions, owner_of: OwnerOf,
    owned_in_request: TopicPartitions | None,
) -> ConsumerGroupMember:
    kept: dict[uuid.UUID, set[int]] = {}
    revoking: dict[uuid.UUID, set[int]] = {}
    newly: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for topic_id in set(member.assigned) | set(target):
        current = member.assigned.get(topic_id, frozenset())
        wanted = target.get(topic_id, frozenset())
        if current & wanted:
            kept[topic_id] = set(current & wanted)
        if current - wanted:
            revoking[topic_id] = set(current - wanted)
        for p in wanted - current:
            owner = owner_of(topic_id, p)
            if owner is None or owner == member.member_id:
                newly.setdefault(topic_id, set()).add(p)
            else:
                unreleased = True
    revoking_tps = {t: frozenset(ps) for t, ps in revoking.items()}
    if revoking and _owns_any(owned_in_request, revoking_tps):
        return _moved(member, MemberState.UNREVOKED_PARTITIONS, member.member_epoch, kept, revoking)
    # Partitions to revoke that the member says it no longer owns are released at once (Kafka
    # `ownsRevokedPartitions`): an eager classic member revokes everything before it rejoins.
    assigned = {t: kept.get(t, set()) | newly.get(t, set()) for t in set(kept) | set(newly)}
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return _moved(member, state, target_epoch, assigned, {})


def _moved(
    member: ConsumerGroupMember,
    state: MemberState,
    epoch: int,
    assigned: dict[uuid.UUID, set[int]],
    revoking: dict[uuid.UUID, set[int]],
) -> ConsumerGroupMember:
    return member.with_changes(
        state=member_transition(member.state, state),
        previous_member_epoch=member.member_epoch if epoch != member.member_epoch else member.previous_member_epoch,
        member_epoch=epoch,
        assigned={t: frozenset(ps) for t, ps in assigned.items() if ps},
        pending_revocation={t: frozenset(ps) for t, ps in revoking.items() if ps},
    )


def _owns_any(owned_in_request: TopicPartitions | None, partitions: TopicPartitions) -> bool:
    """Whether the member may still own some of `partitions`: it does unless its request says
    what it owns (Kafka `CurrentAssignmentBuilder.ownsRevokedPartitions`)."""
    if owned_in_request is None:
        return True
    return any(owned_in_request.get(t, frozenset()) & ps for t, ps in partitions.items())
