"""`kmirror verify`: prove a mirror faithful and measure its RPO, as a Spark job.

One Spark task per partition compares the source's and the destination's logs up to the
destination's high watermark: offsets, leader epochs, batch CRCs and bytes, topic ids.
Exit 0 when every partition is an identical prefix (lag is not divergence), 1 when a
partition diverges (one line each: the first differing offset and what differs), 2 on a
usage or connection error. `--every S --duration S` repeats the verification (the RPO over
time goes into the report).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kmirror.client.admin import Admin
from kmirror.client.errors import KafkaClientError

HEADERS = ("TOPIC", "PARTITION", "SOURCE-END", "DESTINATION-END", "RECORDS-BEHIND", "BYTES-BEHIND",
           "TIME-BEHIND-MS", "STATUS")
EXIT_OK, EXIT_DIVERGED, EXIT_ERROR = 0, 1, 2


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "verify", help="check that a mirror's destination is a byte-exact prefix of its source; report the RPO",
        description="Compare the source and destination logs of mirrored topics (one Spark task per partition).")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT", help="the destination cluster")
    p.add_argument("--source-bootstrap-server", metavar="HOST:PORT",
                   help="the source cluster (default with --mirror: the mirror's bootstrap.servers)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--topic", metavar="REGEX", help="topics of the destination to verify (full-match regex)")
    which.add_argument("--mirror", metavar="NAME", help="verify every topic of this mirror")
    p.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    p.add_argument("--report", type=Path, metavar="FILE.html", help="write an HTML report")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the results as JSON")
    p.add_argument("--every", type=float, metavar="SECONDS", help="verify again every SECONDS (needs --duration)")
    p.add_argument("--duration", type=float, metavar="SECONDS", help="with --every: for this long")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if (args.every is None) != (args.duration is None):
        print("Error: --every and --duration go together", file=sys.stderr)
        return EXIT_ERROR
    if args.every is not None and (args.every <= 0 or args.duration < 0):
        print("Error: --every must be > 0 and --duration >= 0", file=sys.stderr)
        return EXIT_ERROR
    if args.source_bootstrap_server is None and args.mirror is None:
        print("Error: --source-bootstrap-server is required (or name a --mirror)", file=sys.stderr)
        return EXIT_ERROR
    # The Spark job's modules (pyspark, pyarrow) load only when this command runs.
    from kmirror.spark.verify import VerifyError

    try:
        source = args.source_bootstrap_server or asyncio.run(_mirror_source(args.bootstrap_server, args.mirror))
        return _verify(args, source)
    except (VerifyError, KafkaClientError, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_ERROR


async def _mirror_source(bootstrap: str, mirror: str) -> str:
    from kmirror.spark.verify import VerifyError  # loaded with the command (see run)

    async with await Admin.connect(bootstrap) as admin:
        for listed in await admin.list_mirrors():
            if listed.name == mirror:
                return listed.source_bootstrap
    raise VerifyError(f"no mirror named '{mirror}' on {bootstrap}")


def _verify(args: argparse.Namespace, source_bootstrap: str) -> int:
    # The Spark job's modules (pyspark, pyarrow) load only when this command runs.
    from kmirror.spark.verify import plan_verification, run_verification
    from kmirror.spark.verify_compare import divergence_line, totals
    from kmirror.spark.verify_report import Round, write_report

    source_configs = {"bootstrap.servers": source_bootstrap}
    dest_configs = {"bootstrap.servers": args.bootstrap_server}
    rounds: list[Round] = []

    def plan() -> list[Any]:
        return asyncio.run(plan_verification(source_configs, dest_configs, topic_pattern=args.topic,
                                             mirror=args.mirror))

    plan()  # a usage or connection error shows before Spark starts
    spark = _session(args.master)
    deadline = time.monotonic() + (args.duration or 0)
    try:
        while True:
            started = time.monotonic()
            plans = plan()
            results = run_verification(spark, plans, source_configs, dest_configs)
            rounds.append(Round(int(time.time() * 1000), time.monotonic() - started, results))
            t = totals(results)
            print(f"[{time.strftime('%H:%M:%S')}] verified {t.partitions} partition(s) of {t.topics} topic(s): "
                  f"{t.bytes_compared} bytes compared in {rounds[-1].seconds:.1f} s; {t.records_behind} record(s) "
                  f"and {t.bytes_behind} bytes behind; RPO {t.rpo_ms} ms; {t.diverged} diverged", file=sys.stderr)
            next_round = started + args.every if args.every is not None else deadline
            if next_round >= deadline:
                break
            time.sleep(max(0.0, next_round - time.monotonic()))
    finally:
        spark.stop()
    last = rounds[-1].results
    _print_table(last)
    t = totals(last)
    print(f"Total: {t.partitions} partitions, {t.records_behind} records behind, {t.bytes_behind} bytes behind, "
          f"RPO {t.rpo_ms} ms, {t.diverged} diverged, {t.errors} unreadable")
    # A divergence seen in any round counts (the latest seen per partition is shown); errors
    # are the last round's.
    diverged = {(r.plan.topic, r.plan.partition): r for round_ in rounds for r in round_.results
                if r.divergence is not None and r.error is None}
    errors = [r for r in last if r.error is not None]
    for r in [*(diverged[k] for k in sorted(diverged)), *errors]:
        print(("DIVERGED " if r.error is None else "ERROR ") + divergence_line(r))
    if args.json is not None:
        args.json.write_text(json.dumps({
            "source": source_bootstrap, "destination": args.bootstrap_server,
            "totals": _totals_json(last),
            "partitions": [r.to_json() for r in last],
            "rounds": [{"time_ms": r.time_ms, "seconds": r.seconds, **_totals_json(r.results)} for r in rounds],
        }, indent=2))
    if args.report is not None:
        write_report(args.report, source_bootstrap, args.bootstrap_server, rounds)
        print(f"Report: {args.report.resolve()}")
    if diverged:
        return EXIT_DIVERGED
    return EXIT_ERROR if errors else EXIT_OK


def _totals_json(results: list[Any]) -> dict[str, int]:
    from kmirror.spark.verify_compare import totals  # loaded with the command (see run)

    return asdict(totals(results))


def _print_table(results: list[Any]) -> None:
    rows = [HEADERS] + [
        (r.plan.topic, str(r.plan.partition), str(r.plan.source_high_watermark),
         str(r.plan.destination_high_watermark), str(r.records_behind), str(r.bytes_behind),
         str(r.time_behind_ms), r.status)
        for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(len(HEADERS))]
    for row in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def _session(master: str) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession  # loaded with the command (see run)

    spark = (SparkSession.builder.master(master).appName("kmirror-verify")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", os.environ["SPARK_LOCAL_IP"])
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark
