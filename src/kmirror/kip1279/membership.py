"""Topic membership in a mirror: the topic config `mirror.name` (KIP-1279).

`mirror.name=<mirror>` attaches a topic to a mirror; the controller appends `.paused`
(PauseMirrorTopics) or `.removed` (RemoveTopicsFromMirror) and strips `.paused`
(ResumeMirrorTopics). Values parse from the right (the KIP-1279 discussion thread); mirror names cannot end
with a suffix (`kmirror.kip1279.names`), so parsing is unambiguous. The config is internal:
never shown by DescribeConfigs, never copied from a source, and changed only by the mirror
APIs (`HIDDEN_TOPIC_CONFIGS`, `managed_config_refusal`): CreateTopics, AlterConfigs and
IncrementalAlterConfigs that name it are refused, and the legacy AlterConfigs, which replaces
a topic's configs, keeps it.

This module holds, as pure functions over (current `mirror.name`, partition states):
- what each KIP workflow writes to `mirror.name`, or why it is refused (`Rejected`, mapped
  to the KIP error codes at the edge);
- which state the partition leader drives a partition to when membership changes
  (`desired_state`, the broker's onMetadataUpdate decision);
- whether Produce is refused, and how (`write_refusal`: READ_ONLY_TOPIC for a mirror topic,
  a retriable error for a failed-over topic that is not writable yet).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final

from kmirror.config.mirror import MIRROR_NAME_CONFIG as MIRROR_NAME_CONFIG
from kmirror.kip1279.errors import MirrorError
from kmirror.kip1279.names import PAUSED_SUFFIX, REMOVED_SUFFIX
from kmirror.kip1279.state import READ_ONLY_STATES, MirrorPartitionState
from kmirror.protocol.errors import ErrorCode

S = MirrorPartitionState

HIDDEN_TOPIC_CONFIGS: Final = frozenset({MIRROR_NAME_CONFIG})


def managed_config_refusal(names: Iterable[str]) -> str | None:
    """Why a config change naming `names` is refused (-> INVALID_CONFIG), or None. A topic
    that gained or lost `mirror.name` this way would skip the mirror's checks and ACLs, and a
    mirror topic would turn writable without failing over (no truncation to the LSO, no epoch
    bump, no MIRROR_PID_RESET)."""
    named = sorted(set(names) & HIDDEN_TOPIC_CONFIGS)
    if not named:
        return None
    return (f"Topic config {', '.join(named)} can only be changed by the mirror APIs "
            "(AddTopicsToMirror, RemoveTopicsFromMirror, PauseMirrorTopics, ResumeMirrorTopics)")


class MembershipStatus(Enum):
    ACTIVE = ""
    PAUSED = PAUSED_SUFFIX
    REMOVED = REMOVED_SUFFIX


@dataclass(frozen=True, slots=True)
class Membership:
    mirror_name: str
    status: MembershipStatus = MembershipStatus.ACTIVE

    @property
    def config_value(self) -> str:
        """The `mirror.name` value that records this membership."""
        return self.mirror_name + self.status.value


def parse_mirror_name_config(value: str | None) -> Membership | None:
    """A topic's membership from its `mirror.name` value; None when not in any mirror."""
    if not value:
        return None
    for status in (MembershipStatus.REMOVED, MembershipStatus.PAUSED):
        if value.endswith(status.value) and len(value) > len(status.value):
            return Membership(value[: -len(status.value)], status)
    return Membership(value)


# ---- controller workflows ------------------------------------------------------------------


class Refusal(Enum):
    """KIP-1279 error names; the edge maps them to codes (`kmirror.kip1279.errors`)."""

    INVALID_REQUEST = "INVALID_REQUEST"
    UNKNOWN_MIRROR = "UNKNOWN_MIRROR"
    TOPIC_ALREADY_IN_MIRROR = "TOPIC_ALREADY_IN_MIRROR"
    TOPIC_NOT_IN_MIRROR = "TOPIC_NOT_IN_MIRROR"
    MIRROR_TOPIC_ALREADY_PAUSED = "MIRROR_TOPIC_ALREADY_PAUSED"
    MIRROR_TOPIC_NOT_PAUSED = "MIRROR_TOPIC_NOT_PAUSED"
    MIRROR_TOPIC_BEING_REMOVED = "MIRROR_TOPIC_BEING_REMOVED"
    MIRROR_NOT_EMPTY = "MIRROR_NOT_EMPTY"


def refusal_error_code(refusal: Refusal) -> int:
    """The int16 error code a response carries for `refusal`."""
    if refusal is Refusal.INVALID_REQUEST:
        return int(ErrorCode.invalid_request)
    return int(MirrorError[refusal.value])


@dataclass(frozen=True, slots=True)
class Rejected:
    refusal: Refusal
    message: str


@dataclass(frozen=True, slots=True)
class SetMirrorName:
    """The `mirror.name` value to write (a ConfigRecord); None deletes the config."""

    value: str | None


# States from which each workflow accepts a topic: every partition must be in one of them.
ADD_FROM_STATES: Final = frozenset({S.UNKNOWN, S.STOPPED})  # KIP AddTopicsToMirror
PAUSE_FROM_STATES: Final = frozenset({S.MIRRORING})  # KIP Pause Topics
# KIP RemoveTopicsFromMirror names PREPARING and MIRRORING (broker) or MIRRORING
# (controller), while STOPPING is valid from MIRRORING and PAUSED and the KIP's restart
# recipe for FAILED is "remove and add back". Failover must detach every attached partition
# (a single `--remove --topic .*`), so every attached state is accepted; the leader reaches
# STOPPING through the table (`desired_state`). UNKNOWN (leader not started) is refused.
# docs/design/mirroring.md "Workflows".
# STOPPED is accepted for a topic still active in the mirror: its source topic was deleted
# (KIP: partitions move to STOPPED, "the operator would need to manually remove the topic").
REMOVE_FROM_STATES: Final = frozenset({S.PREPARING, S.MIRRORING, S.PAUSING, S.PAUSED, S.FAILED, S.STOPPED})


def _bad_states(states: Iterable[MirrorPartitionState], allowed: frozenset[MirrorPartitionState]) -> list[str]:
    return sorted({s.name for s in states if s not in allowed})


def add_topic(current: str | None, mirror_name: str,
              partition_states: Iterable[MirrorPartitionState]) -> SetMirrorName | Rejected:
    """AddTopicsToMirror for one topic. A topic detached from a mirror (`.removed`, all
    partitions STOPPED) may be added again, to the same mirror (restart, failback) or another."""
    membership = parse_mirror_name_config(current)
    if membership is not None and membership.status is not MembershipStatus.REMOVED:
        return Rejected(Refusal.TOPIC_ALREADY_IN_MIRROR,
                        f"Topic is already assigned to mirror {membership.mirror_name}")
    bad = _bad_states(partition_states, ADD_FROM_STATES)
    if bad:
        return Rejected(Refusal.INVALID_REQUEST, f"Topic partitions must be UNKNOWN or STOPPED, found {bad}")
    return SetMirrorName(mirror_name)


def _attached(current: str | None, mirror_name: str) -> Membership | Rejected:
    membership = parse_mirror_name_config(current)
    if membership is None:
        return Rejected(Refusal.UNKNOWN_MIRROR, "The topic is not assigned to any mirror")
    if membership.mirror_name != mirror_name:
        return Rejected(Refusal.TOPIC_NOT_IN_MIRROR, f"The topic belongs to mirror {membership.mirror_name}")
    return membership


def remove_topic(current: str | None, mirror_name: str,
                 partition_states: Iterable[MirrorPartitionState]) -> SetMirrorName | Rejected:
    """RemoveTopicsFromMirror (failover) for one topic. Idempotent: removing a topic already
    marked `.removed` answers success with the same value, so a failover command can be
    re-run after a partial failure."""
    membership = _attached(current, mirror_name)
    if isinstance(membership, Rejected):
        return membership
    if membership.status is MembershipStatus.REMOVED:
        return SetMirrorName(membership.config_value)
    bad = _bad_states(partition_states, REMOVE_FROM_STATES)
    if bad:
        return Rejected(Refusal.INVALID_REQUEST, f"Topic partitions are not attached to the mirror: {bad}")
    return SetMirrorName(Membership(mirror_name, MembershipStatus.REMOVED).config_value)


def pause_topic(current: str | None, mirror_name: str,
                partition_states: Iterable[MirrorPartitionState]) -> SetMirrorName | Rejected:
    membership = _attached(current, mirror_name)
    if isinstance(membership, Rejected):
        return membership
    if membership.status is MembershipStatus.PAUSED:
        return Rejected(Refusal.MIRROR_TOPIC_ALREADY_PAUSED, "The mirror topic is already paused")
    if membership.status is MembershipStatus.REMOVED:
        return Rejected(Refusal.MIRROR_TOPIC_BEING_REMOVED, "The mirror topic is being removed")
    bad = _bad_states(partition_states, PAUSE_FROM_STATES)
    if bad:
        return Rejected(Refusal.INVALID_REQUEST, f"Topic partitions must be MIRRORING, found {bad}")
    return SetMirrorName(Membership(mirror_name, MembershipStatus.PAUSED).config_value)


def resume_topic(current: str | None, mirror_name: str) -> SetMirrorName | Rejected:
    membership = _attached(current, mirror_name)
    if isinstance(membership, Rejected):
        return membership
    if membership.status is MembershipStatus.REMOVED:
        return Rejected(Refusal.MIRROR_TOPIC_BEING_REMOVED, "The mirror topic is being removed")
    if membership.status is MembershipStatus.ACTIVE:
        return Rejected(Refusal.MIRROR_TOPIC_NOT_PAUSED, "The mirror topic is not paused")
    return SetMirrorName(mirror_name)


@dataclass(frozen=True, slots=True)
class DeleteMirrorPlan:
    """Topics whose `mirror.name` is deleted (they keep their data and stay writable)."""

    detached_topics: tuple[str, ...]


def delete_mirror(mirror_name: str, topic_configs: Mapping[str, str | None],
                  partition_states: Mapping[str, Iterable[MirrorPartitionState]]) -> DeleteMirrorPlan | Rejected:
    """DeleteMirror: refused with MIRROR_NOT_EMPTY while a topic is attached (active or
    paused) or a removed topic has a partition not yet STOPPED (KIP: "empty or all its
    partitions in STOPPED state"). A removed partition without state (UNKNOWN: its FAILED
    state was cleared by the removal) counts as stopped."""
    detached: list[str] = []
    for topic, value in sorted(topic_configs.items()):
        membership = parse_mirror_name_config(value)
        if membership is None or membership.mirror_name != mirror_name:
            continue
        if membership.status is not MembershipStatus.REMOVED:
            return Rejected(Refusal.MIRROR_NOT_EMPTY, f"Topic {topic} is still in mirror {mirror_name}")
        pending = _bad_states(partition_states.get(topic, ()), frozenset({S.STOPPED, S.UNKNOWN}))
        if pending:
            return Rejected(Refusal.MIRROR_NOT_EMPTY, f"Topic {topic} has partitions not yet stopped: {pending}")
        detached.append(topic)
    return DeleteMirrorPlan(tuple(detached))


# ---- partition leader reactions ------------------------------------------------------------


def desired_state(membership: Membership | None, state: MirrorPartitionState, *,
                  source_topic_exists: bool = True) -> MirrorPartitionState | None:
    """The next state the partition leader moves to for this membership, or None to stay.

    Follows the KIP's workflows; every answer is a legal transition from `state`:
    - active: UNKNOWN / STOPPED -> PREPARING (add, restart, failback); PAUSED -> MIRRORING
      (resume: no truncation, fetch from the local log end); PREPARING moves on to
      MIRRORING only when truncation completes (`kmirror.replication.fetcher.truncation`), not here;
    - paused: MIRRORING -> PAUSING; PAUSING -> PAUSED once the fetcher is removed (the
      caller asks after removing it); PREPARING first completes to MIRRORING;
    - removed: MIRRORING / PAUSED -> STOPPING; PAUSING -> PAUSED first; PREPARING -> FAILED
      (the source may be gone, so truncation may never finish: failover must not wait on
      it, and FAILED partitions are detached by the failover plan); STOPPING -> STOPPED is
      reported by the failover plan, not decided here.
    - source topic deleted (`source_topic_exists=False`) while active or paused: MIRRORING /
      PAUSED -> STOPPING, PREPARING -> FAILED (its truncation needs the source topic), and a
      STOPPED partition is not restarted (KIP "Topic Deletion": the operator removes the
      topic from the mirror if the deletion was intended);
    - not in a mirror: nothing to do.
    """
    if membership is None:
        return None
    status = membership.status
    if not source_topic_exists and status is not MembershipStatus.REMOVED:
        return {S.MIRRORING: S.STOPPING, S.PAUSED: S.STOPPING, S.PAUSING: S.PAUSED,
                S.PREPARING: S.FAILED}.get(state)
    if status is MembershipStatus.ACTIVE:
        return {S.UNKNOWN: S.PREPARING, S.STOPPED: S.PREPARING, S.PAUSED: S.MIRRORING}.get(state)
    if status is MembershipStatus.PAUSED:
        return {S.MIRRORING: S.PAUSING, S.PAUSING: S.PAUSED}.get(state)
    return {S.MIRRORING: S.STOPPING, S.PAUSED: S.STOPPING, S.PAUSING: S.PAUSED, S.PREPARING: S.FAILED}.get(state)


class WriteRefusal(Enum):
    """Why a client write (Produce, DeleteRecords) to a partition is refused, mapped to an
    error code at the edge.

    - READ_ONLY: the topic is a mirror topic (attached or paused: the KIP's READ_ONLY_TOPIC,
      which clients do not retry), or a failed-over partition that FAILED (it waits for
      the operator).
    - NOT_YET_WRITABLE: the topic was removed from its mirror (failover) and the partition
      is on its way to STOPPED, or its state is not known here yet (the coordinator loading
      after a restart, or unreachable). It becomes writable without anyone acting, so
      clients get a retriable error (NOT_LEADER_OR_FOLLOWER, as for a partition not ready
      on this broker) and write once it is STOPPED. A permanent error here would fail an
      idempotent producer's records for a window that a restart of the cluster reopens.
    """

    READ_ONLY = "read-only"
    NOT_YET_WRITABLE = "not yet writable"


def write_refusal(membership: Membership | None, state: MirrorPartitionState | None, *,
                  source_topic_deleted: bool = False) -> WriteRefusal | None:
    """Whether Produce / DeleteRecords are refused, and why (`WriteRefusal`).

    `state` is the coordinator's answer for the partition, or None while it is not known
    (coordinator loading or unreachable): an attached topic is then refused, the safe side.
    A removed topic becomes writable only once its partition is STOPPED, or has no state
    left (a FAILED partition whose removal cleared it), i.e. after the failover plan
    truncated to the LSO, reset producer ids and bumped the leader epoch.
    A topic still in its mirror is writable when its partition is STOPPED because the
    source topic was deleted or re-created (`source_topic_deleted`, the partition leader's
    finding; KIP "STOPPED: ... The topic becomes writable"): a STOPPED partition of an
    active topic is otherwise a restart about to truncate, and stays read-only.
    """
    if membership is None:
        return None
    if membership.status is not MembershipStatus.REMOVED:
        return None if source_topic_deleted and state is S.STOPPED else WriteRefusal.READ_ONLY
    if state is S.FAILED:
        return WriteRefusal.READ_ONLY
    return WriteRefusal.NOT_YET_WRITABLE if state is None or state in READ_ONLY_STATES else None


def is_read_only(membership: Membership | None, state: MirrorPartitionState | None, *,
                 source_topic_deleted: bool = False) -> bool:
    """True when client writes are refused (`write_refusal`), whichever the reason."""
    return write_refusal(membership, state, source_topic_deleted=source_topic_deleted) is not None
