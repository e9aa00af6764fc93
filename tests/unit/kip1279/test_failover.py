import pytest

from kmirror.kip1279.failover import (
    AppendMirrorPidReset,
    AwaitMirrorPidResetCommitted,
    AwaitReplicasTruncated,
    BumpLeaderEpoch,
    ClearReadOnly,
    ClearState,
    PersistLastMirroredEpoch,
    QueryLastMirroredEpoch,
    RemoveFetcher,
    ResolveDivergence,
    StartFetcher,
    TransitionTo,
    TruncateByLastMirroredEpoch,
    TruncateToLastStableOffset,
    bump_min_leader_epoch,
    bumped_leader_epoch,
    expires_producer_state,
    pausing_plan,
    plan_for,
    preparing_plan,
    resuming_plan,
    stopping_plan,
)
from kmirror.kip1279.membership import Membership, MembershipStatus
from kmirror.kip1279.state import MirrorPartitionState, transition
from kmirror.records.batch import read_header
from kmirror.records.builder import SimpleRecord, build_batch
from kmirror.records.control import ControlType, build_control_batch, read_control_type
from kmirror.records.mirror_pid_reset import encode_mirror_pid_reset

S = MirrorPartitionState


def replay_states(start, plan):
    state = start
    for action in plan:
        if isinstance(action, TransitionTo):
            state = transition(state, action.state)
    return state


@pytest.mark.parametrize("start", [S.MIRRORING, S.PAUSED])
def test_stopping_plan_order(start):
    plan = stopping_plan(start, "src-cluster")
    assert plan == (
        TransitionTo(S.STOPPING), RemoveFetcher(), TruncateToLastStableOffset(), PersistLastMirroredEpoch(),
        BumpLeaderEpoch(), AppendMirrorPidReset("src-cluster"), AwaitMirrorPidResetCommitted(), TransitionTo(S.STOPPED),
        ClearReadOnly(),
    )
    assert replay_states(start, plan) is S.STOPPED


def test_failed_partition_is_detached_and_its_state_cleared():
    plan = stopping_plan(S.FAILED, "c")
    assert not any(isinstance(a, TransitionTo) for a in plan)
    assert plan[-2:] == (ClearState(), ClearReadOnly())
    assert AppendMirrorPidReset("c") in plan and BumpLeaderEpoch() in plan


@pytest.mark.parametrize("start", [S.UNKNOWN, S.PREPARING, S.PAUSING, S.STOPPING, S.STOPPED])
def test_no_stopping_plan_from_other_states(start):
    with pytest.raises(ValueError):
        stopping_plan(start, "c")


def test_pause_and_resume_plans():
    plan = pausing_plan(S.MIRRORING)
    assert plan == (TransitionTo(S.PAUSING), RemoveFetcher(), TransitionTo(S.PAUSED))
    assert replay_states(S.MIRRORING, plan) is S.PAUSED
    resume = resuming_plan(S.PAUSED)
    assert resume == (TransitionTo(S.MIRRORING), StartFetcher())
    assert not any(isinstance(a, TruncateToLastStableOffset) for a in resume)
    with pytest.raises(ValueError):
        pausing_plan(S.PAUSED)
    with pytest.raises(ValueError):
        resuming_plan(S.MIRRORING)


def test_epoch_bump_is_above_every_mirrored_epoch():
    assert bump_min_leader_epoch(1) == 2
    assert bump_min_leader_epoch(-1) == 0
    assert bumped_leader_epoch(current_leader_epoch=0, min_leader_epoch=8) == 8
    assert bumped_leader_epoch(current_leader_epoch=12, min_leader_epoch=8) == 13


def test_expiry_predicate_on_real_batches():
    reset = build_control_batch(ControlType.MIRROR_PID_RESET, -1, -1, 0,
                                value=encode_mirror_pid_reset("c"), partition_leader_epoch=3)
    header = read_header(reset, 0)
    assert expires_producer_state(header, read_control_type(reset, 0))
    commit = build_control_batch(ControlType.COMMIT, 7, 0, 0)
    assert not expires_producer_state(read_header(commit, 0), read_control_type(commit, 0))
    data = build_batch([SimpleRecord(b"k", b"v", (), 0)])
    assert not expires_producer_state(read_header(data, 0), None)



A, P, R = MembershipStatus.ACTIVE, MembershipStatus.PAUSED, MembershipStatus.REMOVED


@pytest.mark.parametrize("start", [S.UNKNOWN, S.MIRRORING, S.STOPPED])
def test_preparing_plan(start):
    plan = preparing_plan(start)
    assert plan == (TransitionTo(S.PREPARING), QueryLastMirroredEpoch(), TruncateByLastMirroredEpoch(),
                    ResolveDivergence(), AwaitReplicasTruncated(), TransitionTo(S.MIRRORING), StartFetcher())
    assert replay_states(start, plan) is S.MIRRORING


@pytest.mark.parametrize("status", [None, A, P, R])
@pytest.mark.parametrize("state", list(S))
@pytest.mark.parametrize("source_topic_exists", [True, False])
def test_plan_for_only_takes_legal_steps(status, state, source_topic_exists):
    membership = None if status is None else Membership("m", status)
    plan = plan_for(membership, state, "c", source_topic_exists=source_topic_exists)
    replay_states(state, plan)  # raises on an illegal step


@pytest.mark.parametrize(("status", "state", "first", "last"), [
    (A, S.UNKNOWN, TransitionTo(S.PREPARING), StartFetcher()),
    (A, S.PAUSED, TransitionTo(S.MIRRORING), StartFetcher()),
    (P, S.MIRRORING, TransitionTo(S.PAUSING), TransitionTo(S.PAUSED)),
    (P, S.PAUSING, RemoveFetcher(), TransitionTo(S.PAUSED)),
    (R, S.MIRRORING, TransitionTo(S.STOPPING), ClearReadOnly()),
    (R, S.FAILED, RemoveFetcher(), ClearReadOnly()),
    (R, S.PREPARING, TransitionTo(S.FAILED), RemoveFetcher()),
])
def test_plan_for_workflows(status, state, first, last):
    plan = plan_for(Membership("m", status), state, "c")
    assert plan[0] == first and plan[-1] == last


def test_nothing_to_do():
    assert plan_for(None, S.UNKNOWN, "c") == ()
    assert plan_for(Membership("m", A), S.MIRRORING, "c") == ()
    assert plan_for(Membership("m", A), S.FAILED, "c") == ()
    assert plan_for(Membership("m", A), S.STOPPED, "c", source_topic_exists=False) == ()
