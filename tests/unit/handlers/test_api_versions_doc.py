"""docs/operations.md lists the APIs and versions the handler registry serves (what
scripts/api_versions_doc.py makes of it), and the Kafka APIs it does not serve."""


from kio.schema.index import api_key_map

from kmirror.broker.api import load_handlers
from kmirror.testing.scripts import load_script

doc = load_script("api_versions_doc")


def test_operations_md_lists_the_served_apis_as_the_registry_has_them() -> None:
    text = doc.DOC.read_text(encoding="utf-8")
    assert doc.updated(text) == text, "regenerate with `python scripts/api_versions_doc.py`"


def test_every_kafka_api_is_either_served_or_listed_as_not_served() -> None:
    table = doc.render()
    served = {h.api_key for plane in ("broker", "controller") for h in load_handlers(plane)}
    for key in api_key_map:
        rows = [line for line in table.splitlines() if line.startswith(f"| {key} |")]
        assert len(rows) == 1, key
        assert (rows[0].count("|") == 6) is (key in served), rows[0]
    produce = next(line for line in table.splitlines() if line.startswith("| 0 |"))
    handler = next(h for h in load_handlers("broker") if h.api_key == 0)
    assert f"| {handler.min_version}-{handler.max_version} |" in produce
