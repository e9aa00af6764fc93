"""`kmirror delete-records`: kafka-delete-records.sh. Reads `--offset-json-file`
(`{"partitions":[{"topic":"t","partition":0,"offset":10}],"version":1}`; offset -1 is the high
watermark), sends DeleteRecords to each partition's leader and prints Kafka's lines: the new
low watermark of each partition.
"""

from __future__ import annotations

import argparse
import json

from kmirror.cli.command_config import add_admin_arguments, admin_options
from kmirror.cli.errors import CommandError
from kmirror.client.admin import Admin
from kmirror.types import TopicPartition


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("delete-records", help="delete records below an offset (kafka-delete-records.sh)")
    add_admin_arguments(p)
    p.add_argument("--offset-json-file", required=True, metavar="FILE",
                   help='{"partitions":[{"topic":"t","partition":0,"offset":10}],"version":1}')
    p.set_defaults(func=run)


def parse_offset_json(text: str) -> dict[TopicPartition, int]:
    """Kafka's `parseOffsetJsonStringWithoutDedup`, with duplicates refused as the tool does."""
    try:
        document = json.loads(text)
        entries = document["partitions"]
        pairs = [(TopicPartition(str(e["topic"]), int(e["partition"])), int(e["offset"])) for e in entries]
    except (ValueError, TypeError, KeyError) as exc:
        raise CommandError(f"--offset-json-file: not the expected JSON ({exc.__class__.__name__}: {exc})") from None
    if not pairs:
        raise CommandError("--offset-json-file: no partition")
    out: dict[TopicPartition, int] = {}
    for tp, offset in pairs:
        if tp in out:
            raise CommandError(f"Offset json file contains duplicate topic partitions: {tp.topic}-{tp.partition}")
        out[tp] = offset
    return out


async def run(args: argparse.Namespace) -> int:
    try:
        with open(args.offset_json_file, encoding="utf-8") as f:
            offsets = parse_offset_json(f.read())
    except OSError as exc:
        raise CommandError(f"--offset-json-file: cannot read {args.offset_json_file}: {exc.strerror or exc}") from None
    print("Executing records delete operation")
    async with await Admin.connect(args.bootstrap_server, **admin_options(args)) as admin:
        low_watermarks = await admin.delete_records(offsets)
    print("Records delete operation completed:")
    for tp in sorted(low_watermarks, key=lambda tp: (tp.topic, tp.partition)):
        print(f"partition: {tp.topic}-{tp.partition}\tlow_watermark: {low_watermarks[tp]}")
    return 0
