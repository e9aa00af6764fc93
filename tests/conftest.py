"""Bytecode for the processes tests start, and test ordering for the parallel default run.

The suite starts hundreds of Python processes that import kmirror (nodes, CLI commands,
Spark's Python workers). Where PYTHONDONTWRITEBYTECODE is set none of them writes the
bytecode it compiles, and each compiles the sources again: about 0.4 CPU-second of a node's
1.3 to start. So the run first compiles src/ (into its __pycache__ directories, ignored by
git; an up-to-date file is only checked), the way `pip install` compiles an installed package.
The test processes themselves write bytecode too: pytest keeps each test module's rewritten
assertions in such a cache, and without it every worker rewrites all test modules again at
every run (about 10 CPU-seconds per worker before its first test).

`scripts/test.sh` runs modules on pytest-xdist workers with `--dist loadfile`: each worker is
handed whole modules from a queue in collection order, and the run ends when the last worker
finishes its last module. A long module taken last makes a long tail, so the collection is
ordered longest module first (largest-first packing), by the measured durations in
tests/module_durations.txt (written by scripts/module_durations.py); a module missing from the
table counts as the longest, so a new module starts early until it is measured. The tests of
a module keep their order (some modules run ordered steps).

xdist would reorder the modules itself by their number of tests (`--loadscope-reorder`, on by
default), which puts unit modules of many fast tests first and long integration modules of a
few tests last; that reordering is turned off so that the order above is the one handed out.
"""

from __future__ import annotations

import compileall
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Before any test module is collected (this conftest is loaded first, in every process).
sys.dont_write_bytecode = False
TABLE = Path(__file__).resolve().parent / "module_durations.txt"


def module_durations() -> dict[str, int]:
    """{module path relative to the repository root: seconds}."""
    table: dict[str, int] = {}
    for line in TABLE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            seconds, module = line.split()
            table[module] = int(seconds)
    return table


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # once, in the process that starts any workers
        compileall.compile_dir(ROOT / "src", quiet=1)
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    table = module_durations()
    longest = max(table.values(), default=0) + 1

    def module_seconds(item: pytest.Item) -> int:
        try:
            module = item.path.relative_to(ROOT).as_posix()
        except ValueError:
            return longest
        return table.get(module, longest)

    # sorted() is stable: a module's tests keep their order, and modules of equal duration
    # keep the collection's order.
    items[:] = sorted(items, key=lambda item: -module_seconds(item))
