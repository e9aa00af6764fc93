"""The mirror partition state machine (KIP-1279 "MirrorCoordinator", state descriptions).

Rule: everything that decides whether a mirror partition may change state lives in
`VALID_FROM`, the KIP's "Valid from" lists copied verbatim, one entry per target state.
`transition` is the only way to move a state; an illegal pair raises, because a caller
asking for one has a broken invariant (expected refusals, e.g. a WriteMirrorStates with an
illegal target, are checked with `is_valid_transition` first and answered as values).

Wire values: `MirrorPartitionStateValue.State` / `ReadMirrorStates` / `WriteMirrorStates`
carry the state as an int8. UNKNOWN is "the absence of state" and is never persisted; the
KIP's dump-log example shows the first two records of a newly added topic as states 0 and
1 (PREPARING, MIRRORING), so the persisted states are numbered from 0 in the KIP's order
and UNKNOWN is -1 (docs/design/mirroring.md, "State codes").
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from types import MappingProxyType


class MirrorPartitionState(IntEnum):
    UNKNOWN = -1
    PREPARING = 0
    MIRRORING = 1
    PAUSING = 2
    PAUSED = 3
    STOPPING = 4
    STOPPED = 5
    FAILED = 6

    @classmethod
    def from_code(cls, code: int) -> MirrorPartitionState:
        """The state an int8 on the wire names; unknown codes read as UNKNOWN (never guessed)."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


S = MirrorPartitionState
ALL_STATES: tuple[MirrorPartitionState, ...] = tuple(S)

# KIP-1279, "State descriptions": target state -> the states it is valid from.
# UNKNOWN is no target: it is the absence of state (before load, after resignation, after a
# tombstone), never entered by a transition.
VALID_FROM: Mapping[MirrorPartitionState, frozenset[MirrorPartitionState]] = MappingProxyType({
    S.UNKNOWN: frozenset(),
    S.PREPARING: frozenset({S.UNKNOWN, S.MIRRORING, S.STOPPED}),
    S.MIRRORING: frozenset({S.PREPARING, S.PAUSED}),
    S.PAUSING: frozenset({S.MIRRORING}),
    S.PAUSED: frozenset({S.PAUSING}),
    S.STOPPING: frozenset({S.MIRRORING, S.PAUSED}),
    S.STOPPED: frozenset({S.STOPPING}),
    S.FAILED: frozenset(ALL_STATES),  # "Valid from: any state."
})

# A partition whose leader must not accept Produce (read-only): every state of a partition
# still attached to its mirror. STOPPED is writable; UNKNOWN depends on membership
# (`kmirror.kip1279.membership.is_read_only`).
READ_ONLY_STATES: frozenset[MirrorPartitionState] = frozenset(
    {S.PREPARING, S.MIRRORING, S.PAUSING, S.PAUSED, S.STOPPING, S.FAILED}
)

# States in which a mirror fetcher may run for the partition (KIP: the fetcher starts on
# MIRRORING and is removed on PAUSING / STOPPING).
FETCHING_STATES: frozenset[MirrorPartitionState] = frozenset({S.MIRRORING})


class IllegalMirrorStateTransition(Exception):
    def __init__(self, current: MirrorPartitionState, target: MirrorPartitionState) -> None:
        valid = ", ".join(s.name for s in sorted(VALID_FROM[target])) or "nothing"
        super().__init__(
            f"illegal mirror partition state transition {current.name} -> {target.name} "
            f"({target.name} is valid from: {valid})"
        )
        self.current = current
        self.target = target


def is_valid_transition(current: MirrorPartitionState, target: MirrorPartitionState) -> bool:
    return current in VALID_FROM[target]


def transition(current: MirrorPartitionState, target: MirrorPartitionState) -> MirrorPartitionState:
    """`target` if the KIP allows `current -> target`; raises `IllegalMirrorStateTransition`."""
    if not is_valid_transition(current, target):
        raise IllegalMirrorStateTransition(current, target)
    return target


def legal_transitions() -> list[tuple[MirrorPartitionState, MirrorPartitionState]]:
    """Every legal (current, target) pair, in state order."""
    return [(c, t) for c in ALL_STATES for t in ALL_STATES if is_valid_transition(c, t)]


def mermaid_diagram() -> str:
    """The transition table as a Mermaid `stateDiagram-v2` (generated, never hand-edited).

    FAILED ("valid from any state") is drawn once from a composite note rather than from
    every state, so the diagram stays readable; the exact pairs are in `VALID_FROM`.
    """
    lines = ["stateDiagram-v2", "    [*] --> UNKNOWN"]
    for current, target in legal_transitions():
        if target is S.FAILED:
            continue
        lines.append(f"    {current.name} --> {target.name}")
    lines.append("    state \"any state\" as ANY")
    lines.append("    ANY --> FAILED")
    return "\n".join(lines) + "\n"


def markdown_table() -> str:
    """The transition table as Markdown: one row per target state, its "valid from" list."""
    rows = ["| target | valid from |", "|---|---|"]
    for target in ALL_STATES:
        sources = VALID_FROM[target]
        text = "any state" if sources == frozenset(ALL_STATES) else (
            ", ".join(s.name for s in sorted(sources)) or "never entered (absence of state)")
        rows.append(f"| {target.name} | {text} |")
    return "\n".join(rows) + "\n"


def generated_doc_block() -> str:
    """The block of docs/design/mirroring.md generated from the table (kept in sync by a test)."""
    return f"{markdown_table()}\n```mermaid\n{mermaid_diagram()}```\n"
