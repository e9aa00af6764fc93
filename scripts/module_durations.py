"""Write tests/module_durations.txt, the table tests/conftest.py orders test modules by, from
the output of a whole default run with `--durations=0 --durations-min=0` (every test listed).

A module's duration is the sum of its tests' setup, call and teardown times, in whole seconds
(at least 1 for a module that ran). The table is a guide for ordering, not a limit: refresh it
when modules are added or change a lot.

Usage: .venv/bin/python -m pytest -q -n 3 --dist loadfile --durations=0 --durations-min=0 > run.log
       python scripts/module_durations.py run.log
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

TABLE = Path(__file__).resolve().parent.parent / "tests" / "module_durations.txt"
HEADER = """\
# Seconds each test module takes in a default run (sum of setup + call + teardown of its
# tests), longest first, written by scripts/module_durations.py. tests/conftest.py starts the
# longest modules first; a module missing here counts as the longest.
"""
DURATION = re.compile(r"\s*([\d.]+)s (?:setup|call|teardown)\s+(\S+)")


def main(log: Path) -> None:
    totals: Counter[str] = Counter()
    for line in log.read_text(errors="replace").splitlines():
        match = DURATION.match(line)
        if match:
            totals[match.group(2).split("::")[0]] += float(match.group(1))
    if not totals:
        raise SystemExit(f"no --durations=0 lines in {log}")
    rows = sorted(((max(1, round(s)), m) for m, s in totals.items()), key=lambda r: (-r[0], r[1]))
    TABLE.write_text(HEADER + "".join(f"{s:5d} {m}\n" for s, m in rows))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
