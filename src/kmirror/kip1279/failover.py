"""Failover (STOPPING), pause and resume as ordered plans (KIP-1279 "Remove Topics from
Mirror", "Idempotent Producer", "Pause Topics", "Resume Topics").

A plan is a tuple of actions the partition leader's shell executes in order, each only
after the previous one succeeded (persist before you act on it). Values that depend on the
log at that moment (the LSO, the LME) are computed by the shell with the functions here
when it reaches the step, not frozen when the plan is made.

Stopping order. The KIP lists the STOPPING steps in two different orders (remove fetcher,
bump epoch, truncate, LME, PID reset / remove fetcher, truncate, LME, PID reset). kmirror
runs: remove fetcher -> truncate to LSO -> persist LME -> bump leader epoch above the LME ->
append MIRROR_PID_RESET -> STOPPED. The LME is read after the truncation and before any
local append; the epoch bump precedes the control record because the record is appended as
leader with the local leader epoch, which must exceed every mirrored epoch or the epoch cache
would go backwards (docs/design/mirroring.md "Stopping order").
"""

from __future__ import annotations

from dataclasses import dataclass

from kmirror.kip1279.membership import Membership, MembershipStatus, desired_state
from kmirror.kip1279.state import MirrorPartitionState
from kmirror.records.batch import BatchHeader
from kmirror.records.control import ControlType

S = MirrorPartitionState


@dataclass(frozen=True, slots=True)
class TransitionTo:
    """Persist the partition state (local append or WriteMirrorStates)."""

    state: MirrorPartitionState


@dataclass(frozen=True, slots=True)
class RemoveFetcher:
    """Remove the partition from its mirror fetcher; wait until no fetch is in flight for it."""


@dataclass(frozen=True, slots=True)
class TruncateToLastStableOffset:
    """Truncate the local log to its LSO: drop records of undecided transactions."""


@dataclass(frozen=True, slots=True)
class PersistLastMirroredEpoch:
    """Persist `last_mirrored_epoch_of(epoch cache)` (after truncation) in `__mirror_state`."""


@dataclass(frozen=True, slots=True)
class BumpLeaderEpoch:
    """BumpLeaderEpochs with minLeaderEpoch = `bump_min_leader_epoch(lme)`; done once this
    leader runs with the new epoch (from the metadata update)."""


@dataclass(frozen=True, slots=True)
class AppendMirrorPidReset:
    """Append a MIRROR_PID_RESET control batch as leader (new epoch), value
    `kmirror.records.mirror_pid_reset.encode_mirror_pid_reset(source_cluster_id)`; its
    append expires all producer state."""

    source_cluster_id: str


@dataclass(frozen=True, slots=True)
class AwaitMirrorPidResetCommitted:
    """Wait until the partition high watermark is past the MIRROR_PID_RESET offset: with
    more than one replica, a leader crash before the record is replicated could lose it
    while STOPPED already made the topic writable."""


@dataclass(frozen=True, slots=True)
class ClearReadOnly:
    """The partition accepts Produce again."""


@dataclass(frozen=True, slots=True)
class ClearState:
    """Tombstone the partition's state record (back to UNKNOWN, the absence of state)."""


@dataclass(frozen=True, slots=True)
class QueryLastMirroredEpoch:
    """Ask the source for this partition's LME (DescribeMirrors on the source; -1 or an
    unsupported API both mean "none")."""


@dataclass(frozen=True, slots=True)
class TruncateByLastMirroredEpoch:
    """Apply `kmirror.replication.fetcher.truncation.lme_truncation(lme, epoch cache, log end offset)`."""


@dataclass(frozen=True, slots=True)
class ResolveDivergence:
    """Resolve divergence inside the LME epoch with the source (OffsetsForLeaderEpoch for
    the local latest epoch, truncate to min(source end offset of that epoch, local end
    offset of that epoch), again until complete: Kafka's follower truncation), so that a
    partition leaves PREPARING holding a prefix of the source's log."""


@dataclass(frozen=True, slots=True)
class AwaitReplicasTruncated:
    """Wait until `kmirror.replication.fetcher.truncation.truncation_progress(...)` is complete."""


@dataclass(frozen=True, slots=True)
class StartFetcher:
    """Add the partition to a mirror fetcher, fetching from the local log end offset."""


Action = (TransitionTo | RemoveFetcher | TruncateToLastStableOffset | PersistLastMirroredEpoch | BumpLeaderEpoch
          | AppendMirrorPidReset | AwaitMirrorPidResetCommitted | ClearReadOnly | ClearState | QueryLastMirroredEpoch
          | TruncateByLastMirroredEpoch | ResolveDivergence | AwaitReplicasTruncated | StartFetcher)


def _detach_steps(source_cluster_id: str) -> tuple[Action, ...]:
    return (
        RemoveFetcher(),
        TruncateToLastStableOffset(),
        PersistLastMirroredEpoch(),
        BumpLeaderEpoch(),
        AppendMirrorPidReset(source_cluster_id),
        AwaitMirrorPidResetCommitted(),
    )


def detach_resume_plan(current: MirrorPartitionState) -> tuple[Action, ...]:
    """The rest of an interrupted detach whose MIRROR_PID_RESET is already the last record
    of the log (the steps before it ran): wait for it to be committed, then STOPPED (or the
    state cleared, from FAILED). Running the earlier steps again would take the reset's
    epoch for the LME and bump and reset a second time."""
    if current is S.STOPPING:
        return (AwaitMirrorPidResetCommitted(), TransitionTo(S.STOPPED), ClearReadOnly())
    if current is S.FAILED:
        return (AwaitMirrorPidResetCommitted(), ClearState(), ClearReadOnly())
    raise ValueError(f"no detach to resume from {current.name}")


def stopping_plan(current: MirrorPartitionState, source_cluster_id: str) -> tuple[Action, ...]:
    """Failover of one partition, from MIRRORING or PAUSED (STOPPING is valid from these
    only). From FAILED the KIP's restart recipe ("remove and add back") runs the same safe
    steps, then clears the state instead of entering STOPPING/STOPPED, which the table does
    not allow from FAILED; a partition without state is added back through UNKNOWN ->
    PREPARING. Raises ValueError for any other state (the caller drives the partition to
    one of these first: `kmirror.kip1279.membership.desired_state`)."""
    if current in (S.MIRRORING, S.PAUSED):
        return (TransitionTo(S.STOPPING), *_detach_steps(source_cluster_id), TransitionTo(S.STOPPED), ClearReadOnly())
    if current is S.FAILED:
        return (*_detach_steps(source_cluster_id), ClearState(), ClearReadOnly())
    raise ValueError(f"no stopping plan from {current.name}")


def pausing_plan(current: MirrorPartitionState) -> tuple[Action, ...]:
    """Pause: MIRRORING -> PAUSING, remove the fetcher, PAUSED. The partition stays
    read-only; metadata sync stops for it."""
    if current is not S.MIRRORING:
        raise ValueError(f"no pausing plan from {current.name}")
    return (TransitionTo(S.PAUSING), RemoveFetcher(), TransitionTo(S.PAUSED))


def resuming_plan(current: MirrorPartitionState) -> tuple[Action, ...]:
    """Resume: PAUSED -> MIRRORING directly, no truncation, fetch from the local log end."""
    if current is not S.PAUSED:
        raise ValueError(f"no resuming plan from {current.name}")
    return (TransitionTo(S.MIRRORING), StartFetcher())


def preparing_plan(current: MirrorPartitionState) -> tuple[Action, ...]:
    """Start (add, restart, failback): PREPARING, LME truncation, divergence inside the LME
    epoch resolved with the source, wait for the replicas, MIRRORING, start the fetcher
    from the local log end (KIP "Add Topics to Mirror", "Log Convergence")."""
    if current not in (S.UNKNOWN, S.MIRRORING, S.STOPPED):
        raise ValueError(f"no preparing plan from {current.name}")
    return (TransitionTo(S.PREPARING), QueryLastMirroredEpoch(), TruncateByLastMirroredEpoch(),
            ResolveDivergence(), AwaitReplicasTruncated(), TransitionTo(S.MIRRORING), StartFetcher())


def plan_for(membership: Membership | None, state: MirrorPartitionState, source_cluster_id: str, *,
             source_topic_exists: bool = True) -> tuple[Action, ...]:
    """What the partition leader does on a metadata update for a partition in `state` (the
    coordinator's answer): the plan towards `desired_state`, or () to stay. A removed
    FAILED partition gets the detach plan; a FAILED one otherwise waits for the operator."""
    if membership is not None and membership.status is MembershipStatus.REMOVED and state is S.FAILED:
        return stopping_plan(S.FAILED, source_cluster_id)
    target = desired_state(membership, state, source_topic_exists=source_topic_exists)
    if target is None:
        return ()
    if target is S.PREPARING:
        return preparing_plan(state)
    if target is S.STOPPING:
        return stopping_plan(state, source_cluster_id)
    if target is S.PAUSING:
        return pausing_plan(state)
    if target is S.MIRRORING and state is S.PAUSED:
        return resuming_plan(state)
    if target is S.PAUSED:  # PAUSING completes once the fetcher is gone
        return (RemoveFetcher(), TransitionTo(S.PAUSED))
    # FAILED (a PREPARING partition that cannot complete): stop trying to fetch.
    return (TransitionTo(target), RemoveFetcher())


def bump_min_leader_epoch(last_mirrored_epoch: int) -> int:
    """BumpLeaderEpochs.minLeaderEpoch: above every mirrored epoch."""
    return max(last_mirrored_epoch, -1) + 1


def bumped_leader_epoch(current_leader_epoch: int, min_leader_epoch: int) -> int:
    """The controller's new partition leader epoch for a BumpLeaderEpochs entry: a normal
    bump (current + 1), raised to at least `min_leader_epoch`. Epochs never go backwards."""
    return max(current_leader_epoch + 1, min_leader_epoch)


# ---- MIRROR_PID_RESET record (value codec: `kmirror.records.mirror_pid_reset`) -----------


def expires_producer_state(header: BatchHeader, control_type: ControlType | None) -> bool:
    """True when appending (or recovering) this batch must remove every producer entry from
    the producer state: a control batch whose record is MIRROR_PID_RESET. `control_type` is
    the batch's control type (None for data batches)."""
    return header.is_control and control_type is ControlType.MIRROR_PID_RESET
