"""`kmirror demo` runs the whole DR story on real processes and checks itself (exit 0 only
when B verified faithful, the job's output after failover equals an uninterrupted run, and
the job back on A read exactly the new events)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kmirror.testing.processes import free_port_block, kmirror
from kmirror.testing.spark import SKIP_REASON, java_available

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.skipif(not java_available(), reason=SKIP_REASON)]


def test_demo_tells_the_dr_story_and_checks_it(tmp_path: Path) -> None:
    port = free_port_block(2)  # A on port, B on port + 1
    proc = kmirror("demo", "--dir", str(tmp_path / "demo"), "--port", str(port), check=False, timeout=400)
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    report = tmp_path / "demo" / "verify-report.html"
    assert f"report: {report.resolve()}" in out.replace("\n", "")
    assert "FAITHFUL" in report.read_text()
    for words in ("producing to the mirror topic on B is refused: READ_ONLY_TOPIC", "0 diverged",
                  "A is gone (kill -9)", "what failover loses:", "exactly-once:",
                  "on A the job read exactly the 300 new events"):
        assert words in out.replace("\n", " ").replace("  ", " ") or words in out, words
