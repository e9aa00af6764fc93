"""The classic group lifecycle as one transition table (Kafka `ClassicGroupState`).

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
    CompletingRebalance --leader SyncGroup--> Stable
    Stable / CompletingRebalance --join, leave, expiry--> PreparingRebalance
    PreparingRebalance --last member gone--> Empty
    any --group deleted / partition unloaded--> Dead

Every state change goes through `transition`; a change not in `VALID_PREVIOUS_STATES`
is a broken invariant and raises.
"""

from __future__ import annotations

from enum import Enum


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


# Target state -> the states it may be entered from (Kafka `ClassicGroupState.validPreviousStates`).
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.EMPTY,
            GroupState.DEAD,
        }
    ),
}


class IllegalStateTransition(Exception):
    """A group was asked to move between states Kafka's table does not connect."""


def transition(current: GroupState, target: GroupState) -> GroupState:
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalStateTransition(f"group cannot go from {current} to {target}")
    return target


def parse_state(name: str) -> GroupState | None:
    """A ListGroups states filter entry (case-insensitive, as Kafka) to a state."""
    for state in GroupState:
        if state.value.lower() == name.lower():
            return state
    return None
