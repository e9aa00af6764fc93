import pytest

from kmirror.kip1279.errors import error_name
from kmirror.kip1279.membership import (
    DeleteMirrorPlan,
    Membership,
    MembershipStatus,
    Refusal,
    Rejected,
    SetMirrorName,
    WriteRefusal,
    add_topic,
    delete_mirror,
    desired_state,
    is_read_only,
    parse_mirror_name_config,
    pause_topic,
    refusal_error_code,
    remove_topic,
    resume_topic,
    write_refusal,
)
from kmirror.kip1279.state import MirrorPartitionState, is_valid_transition

S = MirrorPartitionState
A, P, R = MembershipStatus.ACTIVE, MembershipStatus.PAUSED, MembershipStatus.REMOVED


@pytest.mark.parametrize(("value", "expected"), [
    (None, None), ("", None),
    ("m", Membership("m", A)),
    ("m.paused", Membership("m", P)),
    ("m.removed", Membership("m", R)),
    ("dr.east.removed", Membership("dr.east", R)),  # parsed from the right
    ("m.removed.x", Membership("m.removed.x", A)),
])
def test_parse(value, expected):
    assert parse_mirror_name_config(value) == expected
    if expected is not None:
        assert expected.config_value == value


def refused(result, refusal):
    return isinstance(result, Rejected) and result.refusal is refusal


def test_add():
    assert add_topic(None, "m", [S.UNKNOWN, S.UNKNOWN]) == SetMirrorName("m")
    assert refused(add_topic("m", "m", [S.MIRRORING]), Refusal.TOPIC_ALREADY_IN_MIRROR)
    assert refused(add_topic("other.paused", "m", [S.PAUSED]), Refusal.TOPIC_ALREADY_IN_MIRROR)
    # restart / failback after removal: all partitions STOPPED
    assert add_topic("m.removed", "m", [S.STOPPED, S.STOPPED]) == SetMirrorName("m")
    assert add_topic("old.removed", "m", [S.STOPPED, S.UNKNOWN]) == SetMirrorName("m")
    assert refused(add_topic("m.removed", "m", [S.STOPPED, S.STOPPING]), Refusal.INVALID_REQUEST)
    assert refused(add_topic(None, "m", [S.FAILED]), Refusal.INVALID_REQUEST)


def test_remove():
    assert remove_topic("m", "m", [S.MIRRORING, S.PAUSED, S.FAILED]) == SetMirrorName("m.removed")
    assert remove_topic("m.paused", "m", [S.PAUSED]) == SetMirrorName("m.removed")
    assert remove_topic("m.removed", "m", [S.STOPPED]) == SetMirrorName("m.removed")  # idempotent
    assert refused(remove_topic(None, "m", []), Refusal.UNKNOWN_MIRROR)
    assert refused(remove_topic("other", "m", [S.MIRRORING]), Refusal.TOPIC_NOT_IN_MIRROR)
    assert refused(remove_topic("m", "m", [S.UNKNOWN]), Refusal.INVALID_REQUEST)
    # source topic deleted: partitions STOPPED while still active; the operator removes it
    assert remove_topic("m", "m", [S.STOPPED]) == SetMirrorName("m.removed")


def test_pause():
    assert pause_topic("m", "m", [S.MIRRORING]) == SetMirrorName("m.paused")
    assert refused(pause_topic("m.paused", "m", [S.PAUSED]), Refusal.MIRROR_TOPIC_ALREADY_PAUSED)
    assert refused(pause_topic("m.removed", "m", [S.STOPPED]), Refusal.MIRROR_TOPIC_BEING_REMOVED)
    assert refused(pause_topic("m", "m", [S.PREPARING]), Refusal.INVALID_REQUEST)
    assert refused(pause_topic(None, "m", []), Refusal.UNKNOWN_MIRROR)
    assert refused(pause_topic("x", "m", []), Refusal.TOPIC_NOT_IN_MIRROR)


def test_resume():
    assert resume_topic("m.paused", "m") == SetMirrorName("m")
    assert refused(resume_topic("m", "m"), Refusal.MIRROR_TOPIC_NOT_PAUSED)
    assert refused(resume_topic("m.removed", "m"), Refusal.MIRROR_TOPIC_BEING_REMOVED)
    assert refused(resume_topic(None, "m"), Refusal.UNKNOWN_MIRROR)
    assert refused(resume_topic("x.paused", "m"), Refusal.TOPIC_NOT_IN_MIRROR)


def test_delete_mirror():
    configs = {"a": "m.removed", "b": "other", "c": None, "d": "m.removed"}
    states = {"a": [S.STOPPED], "d": [S.STOPPED, S.UNKNOWN]}
    assert delete_mirror("m", configs, states) == DeleteMirrorPlan(("a", "d"))
    assert delete_mirror("empty", configs, states) == DeleteMirrorPlan(())
    assert refused(delete_mirror("m", {**configs, "e": "m.paused"}, states), Refusal.MIRROR_NOT_EMPTY)
    assert refused(delete_mirror("m", configs, {**states, "a": [S.STOPPING]}), Refusal.MIRROR_NOT_EMPTY)


@pytest.mark.parametrize("status", [None, A, P, R])
@pytest.mark.parametrize("state", list(S))
def test_desired_state_is_always_a_legal_transition(status, state):
    membership = None if status is None else Membership("m", status)
    target = desired_state(membership, state)
    if target is not None:
        assert is_valid_transition(state, target)


@pytest.mark.parametrize(("status", "state", "target"), [
    (A, S.UNKNOWN, S.PREPARING), (A, S.STOPPED, S.PREPARING), (A, S.PAUSED, S.MIRRORING),
    (A, S.PREPARING, None), (A, S.MIRRORING, None), (A, S.FAILED, None),
    (P, S.MIRRORING, S.PAUSING), (P, S.PAUSING, S.PAUSED), (P, S.PAUSED, None),
    (R, S.MIRRORING, S.STOPPING), (R, S.PAUSED, S.STOPPING), (R, S.PREPARING, S.FAILED),
    (R, S.STOPPED, None), (R, S.FAILED, None),
])
def test_desired_state_workflows(status, state, target):
    assert desired_state(Membership("m", status), state) is target


@pytest.mark.parametrize("status", [A, P])
@pytest.mark.parametrize(("state", "target"), [
    (S.MIRRORING, S.STOPPING), (S.PAUSED, S.STOPPING), (S.PAUSING, S.PAUSED), (S.STOPPED, None),
    (S.UNKNOWN, None), (S.PREPARING, S.FAILED), (S.FAILED, None),
])
def test_source_topic_deleted_stops_and_never_restarts(status, state, target):
    assert desired_state(Membership("m", status), state, source_topic_exists=False) is target


@pytest.mark.parametrize("status", [None, A, P, R])
@pytest.mark.parametrize("state", list(S))
def test_desired_state_legal_without_source_topic(status, state):
    membership = None if status is None else Membership("m", status)
    target = desired_state(membership, state, source_topic_exists=False)
    if target is not None:
        assert is_valid_transition(state, target)


def test_read_only():
    assert not is_read_only(None, None)
    for state in [None, *S]:
        assert is_read_only(Membership("m", A), state)
        assert is_read_only(Membership("m", P), state)
    removed = Membership("m", R)
    assert is_read_only(removed, None)  # state not known yet: stay safe
    assert not is_read_only(removed, S.STOPPED)
    assert not is_read_only(removed, S.UNKNOWN)
    for state in (S.PREPARING, S.MIRRORING, S.PAUSING, S.PAUSED, S.STOPPING, S.FAILED):
        assert is_read_only(removed, state)


def test_write_refusal_kinds():
    """A mirror topic is READ_ONLY (clients do not retry); a failed-over partition on its way
    to STOPPED, or whose state is not known yet (after a restart), is NOT_YET_WRITABLE
    (clients retry); one that FAILED waits for the operator: READ_ONLY."""
    for status in (A, P):
        for state in [None, *S]:
            assert write_refusal(Membership("m", status), state) is WriteRefusal.READ_ONLY
    assert write_refusal(Membership("m", A), S.STOPPED, source_topic_deleted=True) is None
    removed = Membership("m", R)
    for state in (None, S.PREPARING, S.MIRRORING, S.PAUSING, S.PAUSED, S.STOPPING):
        assert write_refusal(removed, state) is WriteRefusal.NOT_YET_WRITABLE
    assert write_refusal(removed, S.FAILED) is WriteRefusal.READ_ONLY
    assert write_refusal(removed, S.STOPPED) is None
    assert write_refusal(None, None) is None


def test_refusal_codes():
    assert refusal_error_code(Refusal.INVALID_REQUEST) == 42
    for refusal in Refusal:
        if refusal is not Refusal.INVALID_REQUEST:
            assert error_name(refusal_error_code(refusal)) == refusal.value
