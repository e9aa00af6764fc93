"""CPU seconds used by this process, its descendants (Spark's JVM and Python workers, client
subprocesses) and given other processes (the nodes): a measure the other work on a shared
machine does not distort, where wall-clock rates do."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def _processes() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds so far) of every process readable in /proc."""
    out: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        # utime + stime, and cutime + cstime: the CPU of children that ended and were reaped
        # (Spark's Python workers come and go), so a measurement never loses them.
        out[int(entry)] = (int(fields[1]), sum(int(f) for f in fields[11:15]) / TICKS)
    return out


def cpu_seconds(extra_pids: Iterable[int] = ()) -> float:
    """CPU seconds so far of this process tree and of `extra_pids` (with their trees)."""
    procs = _processes()
    tree = {os.getpid(), *extra_pids}
    grew = True
    while grew:
        grew = False
        for pid, (parent, _) in procs.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return sum(procs[pid][1] for pid in tree if pid in procs)


def node_pids(base: Path) -> list[int]:
    """The pids of the nodes `kmirror cluster up --dir base` started (their pid files)."""
    return [int(p.read_text().strip()) for p in base.glob("node-*.pid") if p.read_text().strip()]
