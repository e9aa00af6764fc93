import itertools

import pytest

from kmirror.kip1279.state import (
    ALL_STATES,
    VALID_FROM,
    IllegalMirrorStateTransition,
    MirrorPartitionState,
    is_valid_transition,
    legal_transitions,
    mermaid_diagram,
    transition,
)

S = MirrorPartitionState

# The KIP's "Valid from" lists, written out as pairs independently of the module's table.
KIP_LEGAL = {
    (S.UNKNOWN, S.PREPARING), (S.MIRRORING, S.PREPARING), (S.STOPPED, S.PREPARING),
    (S.PREPARING, S.MIRRORING), (S.PAUSED, S.MIRRORING),
    (S.MIRRORING, S.PAUSING),
    (S.PAUSING, S.PAUSED),
    (S.MIRRORING, S.STOPPING), (S.PAUSED, S.STOPPING),
    (S.STOPPING, S.STOPPED),
} | {(s, S.FAILED) for s in S}


def test_eight_states():
    assert [s.name for s in ALL_STATES] == [
        "UNKNOWN", "PREPARING", "MIRRORING", "PAUSING", "PAUSED", "STOPPING", "STOPPED", "FAILED"]


@pytest.mark.parametrize(("current", "target"), list(itertools.product(S, S)),
                         ids=lambda s: s.name)
def test_every_pair(current, target):
    if (current, target) in KIP_LEGAL:
        assert is_valid_transition(current, target)
        assert transition(current, target) is target
    else:
        assert not is_valid_transition(current, target)
        with pytest.raises(IllegalMirrorStateTransition) as info:
            transition(current, target)
        assert info.value.current is current and info.value.target is target
        assert current.name in str(info.value) and target.name in str(info.value)


def test_pair_counts():
    assert len(KIP_LEGAL) == 18
    assert set(legal_transitions()) == KIP_LEGAL
    assert len(list(itertools.product(S, S))) - len(KIP_LEGAL) == 46


def test_unknown_is_never_a_target():
    assert VALID_FROM[S.UNKNOWN] == frozenset()


def test_wire_codes():
    # dump-log example in the KIP: first records of a new mirror topic are states 0 then 1.
    assert (S.PREPARING.value, S.MIRRORING.value) == (0, 1)
    assert S.from_code(6) is S.FAILED
    assert S.from_code(42) is S.UNKNOWN


def test_diagram_has_every_non_failed_edge():
    text = mermaid_diagram()
    assert text.startswith("stateDiagram-v2\n")
    for current, target in KIP_LEGAL:
        if target is not S.FAILED:
            assert f"    {current.name} --> {target.name}\n" in text
    assert "ANY --> FAILED" in text
