from pathlib import Path

from kmirror.quorum.state import mermaid_diagram

DOC = Path(__file__).resolve().parents[3] / "docs" / "design" / "controller.md"


def test_the_roles_diagram_in_the_design_doc_is_generated_from_the_table() -> None:
    assert f"```mermaid\n{mermaid_diagram()}```" in DOC.read_text(encoding="utf-8"), (
        "docs/design/controller.md is stale: paste kmirror.quorum.state.mermaid_diagram() into "
        "'The metadata quorum'")
