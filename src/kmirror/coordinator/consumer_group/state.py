"""States of a KIP-848 consumer group and of its members (Kafka `ConsumerGroup.ConsumerGroupState`,
`MemberState`).

A group's state is derived from its epochs, never set:

    Empty        no members
    Assigning    group epoch > target assignment epoch: the assignor must run
    Reconciling  some member is not yet at the target assignment epoch, or is revoking /
                 waiting for partitions
    Stable       every member is Stable at the target assignment epoch

A member's state is the reconciliation step it is in (`reconciliation.next_assignment`):

    Stable                 owns exactly its target assignment at its epoch
    UnrevokedPartitions    must revoke partitions (it keeps its epoch until it has)
    UnreleasedPartitions   at the new epoch, waiting for partitions another member still owns

`MEMBER_TRANSITIONS` is the table of reconciliation moves; an illegal move raises.
"""

from __future__ import annotations

from enum import Enum


class ConsumerGroupState(Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


class MemberState(Enum):
    """Values are Kafka's `MemberState` bytes, stored in the current assignment record."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


# Target state -> the states a member may move to it from. A new member starts Stable at
# epoch 0 with nothing assigned; every reconciliation step may land in any state, except
# that a member only becomes UnrevokedPartitions from a state that owned partitions.
MEMBER_TRANSITIONS: dict[MemberState, frozenset[MemberState]] = {
    MemberState.STABLE: frozenset(
        {MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS, MemberState.UNRELEASED_PARTITIONS}
    ),
    MemberState.UNREVOKED_PARTITIONS: frozenset(
        {MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS, MemberState.UNRELEASED_PARTITIONS}
    ),
    MemberState.UNRELEASED_PARTITIONS: frozenset(
        {MemberState.STABLE, MemberState.UNREVOKED_PARTITIONS, MemberState.UNRELEASED_PARTITIONS}
    ),
    MemberState.UNKNOWN: frozenset(),
}


class IllegalMemberTransition(Exception):
    """A member was moved between reconciliation states the table does not connect."""


def member_transition(current: MemberState, target: MemberState) -> MemberState:
    if current not in MEMBER_TRANSITIONS[target]:
        raise IllegalMemberTransition(f"member cannot go from {current.name} to {target.name}")
    return target


def parse_consumer_group_state(name: str) -> ConsumerGroupState | None:
    for state in ConsumerGroupState:
        if state.value.lower() == name.lower():
            return state
    return None


def mermaid_diagram() -> str:
    """`MEMBER_TRANSITIONS` as a Mermaid `stateDiagram-v2` (generated, never hand-edited;
    docs/design/consumer-groups.md carries it and a test keeps the two equal)."""
    lines = ["stateDiagram-v2", "    [*] --> STABLE"]
    for target, sources in MEMBER_TRANSITIONS.items():
        for source in sorted(sources, key=lambda s: s.value):
            lines.append(f"    {source.name} --> {target.name}")
    return "\n".join(lines) + "\n"
