"""What the doc generators share: a generated section between two marker lines of a doc, and
the command that rewrites it or, with `--check`, says whether it is current."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def replace_section(text: str, begin: str, end: str, body: str) -> str:
    """`text` with everything from the `begin` marker to the `end` marker (both included)
    replaced by `body` (which carries the markers again)."""
    start, stop = text.index(begin), text.index(end) + len(end)
    return text[:start] + body + text[stop:]


def main(description: str, doc: Path, updated: Callable[[str], str], command: str) -> int:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when the doc is not current")
    args = parser.parse_args()
    text = doc.read_text(encoding="utf-8")
    new = updated(text)
    if args.check:
        if new != text:
            print(f"{doc} is not current: run {command}", file=sys.stderr)
            return 1
        return 0
    doc.write_text(new, encoding="utf-8")
    return 0
