"""`kmirror.spark` sits above the client: it imports kmirror's client, records, protocol
and types only, never broker, log, replication, mirror or runtime code (Spark executors run
it far from any broker)."""

from __future__ import annotations

import ast
from pathlib import Path

import kmirror.spark

ALLOWED = ("kmirror.spark", "kmirror.client", "kmirror.records", "kmirror.protocol", "kmirror.types")


def test_spark_imports_only_the_client_records_protocol_and_types() -> None:
    package = Path(kmirror.spark.__file__).parent
    offending = []
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offending += [f"{path.name}: {n}" for n in names
                          if n.startswith("kmirror") and not any(n == a or n.startswith(a + ".") for a in ALLOWED)]
    assert offending == []
