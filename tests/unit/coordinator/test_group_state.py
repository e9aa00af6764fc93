import pytest

from kmirror.coordinator.group.state import (
    VALID_PREVIOUS_STATES,
    GroupState,
    IllegalStateTransition,
    parse_state,
    transition,
)

S = GroupState
LEGAL = {(prev, target) for target, prevs in VALID_PREVIOUS_STATES.items() for prev in prevs}


@pytest.mark.parametrize("prev", list(S))
@pytest.mark.parametrize("target", list(S))
def test_transition_follows_kafkas_table(prev, target):
    if (prev, target) in LEGAL:
        assert transition(prev, target) is target
    else:
        with pytest.raises(IllegalStateTransition):
            transition(prev, target)


def test_table_matches_kafka_classic_group_state():
    assert VALID_PREVIOUS_STATES[S.STABLE] == {S.COMPLETING_REBALANCE}
    assert VALID_PREVIOUS_STATES[S.EMPTY] == {S.PREPARING_REBALANCE}
    assert VALID_PREVIOUS_STATES[S.COMPLETING_REBALANCE] == {S.PREPARING_REBALANCE}
    assert VALID_PREVIOUS_STATES[S.PREPARING_REBALANCE] == {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY}
    assert VALID_PREVIOUS_STATES[S.DEAD] == set(S)


def test_parse_state_is_case_insensitive():
    assert parse_state("stable") is S.STABLE
    assert parse_state("PreparingRebalance") is S.PREPARING_REBALANCE
    assert parse_state("nope") is None
