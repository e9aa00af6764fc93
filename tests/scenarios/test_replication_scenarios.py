"""Runs the replication scenario scripts in tests/scenarios/replication/*.txt.

A script is a sequence of blocks separated by blank lines: a command line, `----`, and the
expected output. `KMIRROR_REWRITE=1` rewrites the expected outputs from the actual ones.
Commands (one partition t-0, brokers in-process, see `kmirror.testing.replication_harness`):
  new brokers=1,2,3 [min_isr=N] [lag_ms=N] [unclean=true]
  produce n=N acks=1|all          fetch B [times=N]        tick MS
  shrink                          controller               elect B [unclean]
  fence B                         crash B                  restart B          flush B
  state                           records B                check
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kmirror.testing.replication_harness import ReplicationHarness

SCRIPTS = sorted((Path(__file__).parent / "replication").glob("*.txt"))


def parse(text: str) -> list[tuple[str, list[str]]]:
    blocks: list[tuple[str, list[str]]] = []
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    i = 0
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        command = lines[i].strip()
        assert i + 1 < len(lines) and lines[i + 1] == "----", f"missing ---- after {command!r}"
        i += 2
        expected: list[str] = []
        while i < len(lines) and lines[i].strip():
            expected.append(lines[i])
            i += 1
        blocks.append((command, expected))
    return blocks


def run(harness: ReplicationHarness | None, command: str) -> tuple[ReplicationHarness | None, list[str]]:
    name, *args = command.split()
    kv = dict(a.split("=", 1) for a in args if "=" in a)
    positional = [a for a in args if "=" not in a]
    if name == "new":
        brokers = tuple(int(b) for b in kv.get("brokers", "1,2,3").split(","))
        harness = ReplicationHarness(
            brokers, int(kv.get("min_isr", "1")), int(kv.get("lag_ms", "30000")), kv.get("unclean") == "true"
        )
        return harness, harness.state_lines()
    assert harness is not None, "first command must be `new`"
    if name == "produce":
        return harness, [harness.produce(int(kv.get("n", "1")), -1 if kv.get("acks") == "all" else int(kv.get("acks", "1")))]
    if name == "fetch":
        return harness, [harness.fetch(int(positional[0])) for _ in range(int(kv.get("times", "1")))]
    if name == "tick":
        harness.tick(int(positional[0]))
        return harness, []
    if name == "shrink":
        return harness, [harness.shrink()]
    if name == "controller":
        return harness, harness.controller()
    if name == "elect":
        return harness, [harness.elect(int(positional[0]), unclean="unclean" in positional[1:])]
    if name == "fence":
        return harness, [harness.fence(int(positional[0]))]
    if name == "flush":
        harness.brokers[int(positional[0])].flush()
        return harness, []
    if name == "crash":
        harness.brokers[int(positional[0])].crash()
        return harness, []
    if name == "restart":
        return harness, [harness.restart(int(positional[0]))]
    if name == "state":
        return harness, harness.state_lines()
    if name == "records":
        recs = harness.records(int(positional[0]))
        return harness, [" ".join(f"{o}:{v.decode()}" for o, v in sorted(recs.items())) or "(empty)"]
    if name == "check":
        return harness, check(harness)
    raise AssertionError(f"unknown command {command!r}")


def check(harness: ReplicationHarness) -> list[str]:
    """Every acknowledged (acks=all) record is on every live ISR member, unchanged."""
    reg = harness.registration
    problems = []
    for b in reg.isr:
        broker = harness.brokers[b]
        if not broker.alive:
            continue
        recs = harness.records(b)
        for offset, value in harness.acked.items():
            if recs.get(offset) != value:
                problems.append(f"broker {b} offset {offset}: {recs.get(offset)!r} != acked {value!r}")
    return problems or [f"ok: {len(harness.acked)} acknowledged records on every live ISR member"]


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_scenario(script: Path) -> None:
    blocks = parse(script.read_text())
    harness: ReplicationHarness | None = None
    actual_text: list[str] = []
    mismatches: list[str] = []
    for command, expected in blocks:
        harness, output = run(harness, command)
        output = output or ["ok"]
        actual_text += [command, "----", *output, ""]
        if output != expected:
            mismatches.append(f"{command}\n  expected: {expected}\n  actual:   {output}")
    if os.environ.get("KMIRROR_REWRITE") == "1":
        header = [line for line in script.read_text().splitlines() if line.startswith("#")]
        script.write_text("\n".join(header + [""] + actual_text).rstrip() + "\n")
        return
    assert not mismatches, f"{script.name}:\n" + "\n".join(mismatches)
