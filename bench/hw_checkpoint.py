"""The high watermark checkpoint a broker writes every `replica.high.watermark.checkpoint.interval.ms`
(5 s), at N partitions: what it costs the event loop and the worker thread, against writing the
same file with plain `os` calls in the same run.

For each N (`--partitions`), N logs are created through kmirror's `LogManager` in a fresh
directory, then, best of `--repeat`:

1. loop: `LogManager.checkpoint_snapshot(high_watermarks_only=True)`, the part a node runs on
   its event loop (the offsets read where the logs change);
2. write: `LogManager.write_checkpoints(snapshot)`, the part a worker thread runs (the
   `replication-offset-checkpoint` file formatted, written, fsync'd and renamed into place);
3. baseline: the same N lines written to a file with `open().write()`, `os.fsync` and
   `os.replace`, the least any checkpoint write costs.

Wall and CPU ms (`time.process_time`) of each; "loop share" is the loop part's wall time over
the 5 s interval, the fraction of the event loop the checkpoints take.

    .venv/bin/python bench/hw_checkpoint.py [--partitions 1000,3000,10000] [--repeat 5] [--plot docs/hw_checkpoint.png]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from line_plot import save_line_plot

from kmirror.log.config import LogConfig
from kmirror.log.log_manager import LogManager
from kmirror.runtime.node import SystemClock
from kmirror.runtime.os_fs import OsFileSystem
from kmirror.types import TopicPartition

TOPIC = "wide"
INTERVAL_MS = 5000


def timed(action: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Best (wall ms, CPU ms) of `repeat` runs."""
    best = (float("inf"), float("inf"))
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        action()
        best = min(best, ((time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000))
    return best


def plain_write(path: str, lines: list[str]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("0\n" + f"{len(lines)}\n" + "".join(line + "\n" for line in lines))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


Timings = dict[str, tuple[float, float]]  # part -> (wall ms, CPU ms)


def one(n: int, repeat: int, parent: str | None) -> Timings:
    base = tempfile.mkdtemp(prefix="kmirror-bench-hw-", dir=parent)
    try:
        manager = LogManager(OsFileSystem(), [base], SystemClock(), LogConfig())
        topic_id = uuid.uuid4()
        for i in range(n):
            manager.get_or_create_log(TopicPartition(TOPIC, i), topic_id, LogConfig())
        manager.flush_new_logs()
        snapshot = manager.checkpoint_snapshot(high_watermarks_only=True)
        loop = timed(lambda: manager.checkpoint_snapshot(high_watermarks_only=True), repeat)
        write = timed(lambda: manager.write_checkpoints(snapshot), repeat)
        lines = [f"{TOPIC} {i} 0" for i in range(n)]
        baseline = timed(lambda: plain_write(os.path.join(base, "plain-checkpoint"), lines), repeat)
        manager.close()
        return {"loop": loop, "write": write, "plain os write": baseline}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", default="1000,3000,10000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", default=None, help="where to create the logs (default: a temporary directory)")
    parser.add_argument("--plot", type=Path, default=None, help="save a chart of wall ms by partitions here")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    print("| partitions | loop: wall ms (CPU ms) | write: wall ms (CPU ms) | plain os write: wall ms (CPU ms) "
          "| write CPU / plain | loop share of 5 s |")
    print("|---|---|---|---|---|---|")
    results: dict[int, Timings] = {}
    for n in (int(p) for p in args.partitions.split(",")):
        t = results[n] = one(n, args.repeat, args.dir)
        loop, write, plain = t["loop"], t["write"], t["plain os write"]
        print(f"| {n} | {loop[0]:.2f} ({loop[1]:.2f}) | {write[0]:.2f} ({write[1]:.2f}) | {plain[0]:.2f} "
              f"({plain[1]:.2f}) | {write[1] / plain[1]:.1f}x | {loop[0] / INTERVAL_MS:.3%} |", flush=True)
    if args.plot:
        save_line_plot(args.plot, {part: [(n, t[part][0]) for n, t in results.items()] for part in
                                   ("loop", "write", "plain os write")},
                       "partitions", "wall ms (best of runs)", "High watermark checkpoint, every 5 s")


if __name__ == "__main__":
    main()
