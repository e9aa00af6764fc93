from pathlib import Path

from kmirror.kip1279.state import generated_doc_block

DOC = Path(__file__).resolve().parents[3] / "docs" / "design" / "mirroring.md"


def test_state_diagram_in_the_design_doc_is_generated_from_the_table():
    assert generated_doc_block() in DOC.read_text(encoding="utf-8"), (
        "docs/design/mirroring.md is stale: paste the output of "
        "kmirror.kip1279.state.generated_doc_block() into its state machine section")
