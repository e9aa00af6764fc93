"""The transaction state machine (Kafka `TransactionState`, KIP-98).

Rule: everything that decides whether a transactional id's state may change lives in
`VALID_FROM`, one entry per target state, Kafka's `validPreviousStates` lists. `transition`
is the only way to move a state; an illegal pair raises, because the coordinator asking for
one has a broken invariant (expected refusals such as EndTxn in Empty are answered with
error codes before any transition is attempted).

Wire values: `TransactionLogValue.TransactionStatus` is an int8 with Kafka's numbering, and
DescribeTransactions / ListTransactions name states as Kafka's `TransactionState.stateName`.
PREPARE_EPOCH_FENCE is never persisted: it is the in-memory step of a fence (a timed-out
transaction, or InitProducerId during an ongoing one) before its PREPARE_ABORT is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from types import MappingProxyType


class TransactionState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def state_name(self) -> str:
        """Kafka's name for the state (kafka-transactions.sh, DescribeTransactions)."""
        return _NAMES[self]

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        for state, state_name in _NAMES.items():
            if state_name == name:
                return state
        return None

    @property
    def is_complete(self) -> bool:
        return self in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)

    @property
    def is_prepare(self) -> bool:
        return self in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)


S = TransactionState
ALL_STATES: tuple[TransactionState, ...] = tuple(S)

_NAMES: Mapping[TransactionState, str] = MappingProxyType({
    S.EMPTY: "Empty",
    S.ONGOING: "Ongoing",
    S.PREPARE_COMMIT: "PrepareCommit",
    S.PREPARE_ABORT: "PrepareAbort",
    S.COMPLETE_COMMIT: "CompleteCommit",
    S.COMPLETE_ABORT: "CompleteAbort",
    S.DEAD: "Dead",
    S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
})

# Target state -> the states it is valid from (Kafka `TransactionState.validPreviousStates`).
VALID_FROM: Mapping[TransactionState, frozenset[TransactionState]] = MappingProxyType({
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
})

# States in which a transaction is open on its partitions: markers are still owed.
OPEN_STATES: frozenset[TransactionState] = frozenset({S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT,
                                                      S.PREPARE_EPOCH_FENCE})


class IllegalTransactionStateTransition(Exception):
    def __init__(self, current: TransactionState, target: TransactionState) -> None:
        valid = ", ".join(s.state_name for s in sorted(VALID_FROM[target])) or "nothing"
        super().__init__(f"illegal transaction state transition {current.state_name} -> {target.state_name} "
                         f"({target.state_name} is valid from: {valid})")
        self.current = current
        self.target = target


def is_valid_transition(current: TransactionState, target: TransactionState) -> bool:
    return current in VALID_FROM[target]


def transition(current: TransactionState, target: TransactionState) -> TransactionState:
    """`target` if `current -> target` is legal; raises `IllegalTransactionStateTransition`."""
    if not is_valid_transition(current, target):
        raise IllegalTransactionStateTransition(current, target)
    return target


def legal_transitions() -> list[tuple[TransactionState, TransactionState]]:
    return [(c, t) for c in ALL_STATES for t in ALL_STATES if is_valid_transition(c, t)]


def mermaid_diagram() -> str:
    """The table as a Mermaid `stateDiagram-v2` (generated, never hand-edited). Self-loops
    (Empty -> Empty on an epoch bump, Ongoing -> Ongoing on AddPartitionsToTxn) are drawn too."""
    lines = ["stateDiagram-v2", "    [*] --> Empty"]
    for current, target in legal_transitions():
        lines.append(f"    {current.state_name} --> {target.state_name}")
    return "\n".join(lines) + "\n"


def markdown_table() -> str:
    rows = ["| target | valid from |", "|---|---|"]
    for target in ALL_STATES:
        rows.append(f"| {target.state_name} | {', '.join(s.state_name for s in sorted(VALID_FROM[target]))} |")
    return "\n".join(rows) + "\n"


def generated_doc_block() -> str:
    """The block of docs/design/transactions.md generated from the table (a test keeps them equal)."""
    return f"{markdown_table()}\n```mermaid\n{mermaid_diagram()}```\n"
