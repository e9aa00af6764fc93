"""Creating N partition logs through kmirror's `LogManager`, against creating the same files
with plain `os` calls, same disk, same run; then the deferred syncs that make them durable.

Per round and N (`--partitions`), in a fresh directory each:

1. baseline: N partition directories, each with the files a new log has (an empty `.log`,
   `.index` and `.timeindex`, `partition.metadata`, `leader-epoch-checkpoint`), written with
   `os.mkdir` and `open().write()`, no fsync;
2. kmirror: `LogManager.get_or_create_log` of N partitions with a topic id, and the first
   leader epoch assigned, as a broker's metadata publisher creates them;
3. sync: `LogManager.flush_new_logs()`, what a worker thread runs after the creation is
   published (an fsync of each `partition.metadata` and partition directory, one of the log dir).

Wall and CPU seconds (`time.process_time`) of each; the ratio is kmirror's CPU over the
baseline's. The rounds alternate the two so both see the same machine.

    .venv/bin/python bench/log_creation.py [--partitions 1000,10000] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable

from kmirror.log.config import LogConfig
from kmirror.log.log_manager import LogManager
from kmirror.runtime.node import SystemClock
from kmirror.runtime.os_fs import OsFileSystem
from kmirror.types import TopicPartition

TOPIC = "wide"
FILES = ("00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex",
         "partition.metadata", "leader-epoch-checkpoint")


def plain(root: str, n: int) -> None:
    for i in range(n):
        d = os.path.join(root, f"{TOPIC}-{i}")
        os.mkdir(d)
        for name in FILES:
            with open(os.path.join(d, name), "wb") as f:
                f.write(b"version: 0\n" if name == "partition.metadata" else b"")


def through_log_manager(root: str, n: int) -> LogManager:
    manager = LogManager(OsFileSystem(), [root], SystemClock(), LogConfig())
    topic_id = uuid.uuid4()
    for i in range(n):
        log = manager.get_or_create_log(TopicPartition(TOPIC, i), topic_id, LogConfig())
        log.assign_epoch_start_offset(0, 0)
    return manager


def timed(action: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", default="1000,10000")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dir", default=None, help="where to create the logs (default: a temporary directory)")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    print("| partitions | round | plain os: wall s (CPU s) | kmirror: wall s (CPU s) | CPU ratio | sync after: wall s |")
    print("|---|---|---|---|---|---|")
    for n in (int(p) for p in args.partitions.split(",")):
        for round_no in range(1, args.rounds + 1):
            print(one_round(n, round_no, args.dir), flush=True)


def one_round(n: int, round_no: int, parent: str | None) -> str:
    base = tempfile.mkdtemp(prefix="kmirror-bench-logs-", dir=parent)
    try:
        os.mkdir(os.path.join(base, "plain"))
        os.mkdir(os.path.join(base, "kmirror"))
        plain_wall, plain_cpu = timed(lambda: plain(os.path.join(base, "plain"), n))
        managers: list[LogManager] = []
        km_wall, km_cpu = timed(lambda: managers.append(through_log_manager(os.path.join(base, "kmirror"), n)))
        sync_wall, _ = timed(managers[0].flush_new_logs)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return (f"| {n:,} | {round_no} | {plain_wall:.2f} ({plain_cpu:.2f}) | {km_wall:.2f} ({km_cpu:.2f}) | "
            f"{km_cpu / max(plain_cpu, 1e-9):.2f}x | {sync_wall:.2f} |")

if __name__ == "__main__":
    main()
