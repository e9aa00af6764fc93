"""`kmirror get-offsets`: kafka-get-offsets.sh (GetOffsetShell). ListOffsets for every
partition the filters select, one `topic:partition:offset` line each, sorted as Kafka sorts
them (by `topic-partition`); a partition with no offset for the time (a timestamp past its
last record) prints nothing.

Filters: `--topic REGEX` (whole name) and `--partitions 0,1`, or `--topic-partitions
'REGEX:N,REGEX:N-M,:N-,REGEX:-M'` (ranges: lower inclusive, upper exclusive); internal topics
are included unless `--exclude-internal-topics`. `--time`: `latest`/-1 (default),
`earliest`/-2, `max-timestamp`/-3, or a timestamp in ms.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

from kmirror.cli.command_config import add_admin_arguments, admin_options
from kmirror.cli.errors import CommandError
from kmirror.client.admin import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, Admin
from kmirror.types import TopicPartition

NAMED_TIMES = {"latest": LATEST_TIMESTAMP, "earliest": EARLIEST_TIMESTAMP, "max-timestamp": MAX_TIMESTAMP}
RULE = re.compile(r"([^:,]*)(?::(?:([0-9]+)|(?:([0-9]*)-([0-9]*))))?")
"""Kafka's TOPIC_PARTITION_PATTERN: a topic regex, then a partition, `N-M`, `N-` or `-M`."""

PartitionFilter = Callable[[str, int], bool]


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("get-offsets", help="offsets of topic partitions for a time (kafka-get-offsets.sh)")
    add_admin_arguments(p)
    p.add_argument("--topic", help="topic regex (whole name); all topics when absent")
    p.add_argument("--partitions", help="comma separated partition ids; all when absent")
    p.add_argument("--topic-partitions", metavar="PATTERNS",
                   help="comma separated REGEX:N, REGEX:N-M, REGEX:N- or REGEX:-M (not with --topic/--partitions)")
    p.add_argument("--time", default="latest",
                   help="latest or -1 (default), earliest or -2, max-timestamp or -3, or a timestamp in ms")
    p.add_argument("--exclude-internal-topics", action="store_true", help="leave out internal topics")
    p.set_defaults(func=run)


def parse_time(text: str) -> int:
    if text in NAMED_TIMES:
        return NAMED_TIMES[text]
    try:
        value = int(text)
    except ValueError:
        raise CommandError(f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / "
                           "-3 or max-timestamp, or a specified long format timestamp") from None
    if value < MAX_TIMESTAMP:
        raise CommandError(f"--time {text}: kmirror keeps every log locally; only -1, -2, -3 or a timestamp")
    return value


def _regex(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text or ".*")
    except re.error as exc:
        raise CommandError(f"invalid topic regex '{text}': {exc}") from None


def partition_filter(args: argparse.Namespace) -> PartitionFilter:
    if args.topic_partitions is not None:
        if args.topic is not None or args.partitions is not None:
            raise CommandError("--topic-partitions cannot be used with --topic or --partitions")
        rules: list[PartitionFilter] = []
        for spec in args.topic_partitions.split(","):
            m = RULE.fullmatch(spec)
            if m is None or spec == "":
                raise CommandError(f"Invalid rule specification: {spec}")
            topic, single, low, high = m.groups()
            pattern = _regex(topic)
            lo = int(single) if single else int(low or 0)
            hi = int(single) + 1 if single else int(high) if high else 2**31

            def rule(t: str, p: int, pattern: re.Pattern[str] = pattern, lo: int = lo, hi: int = hi) -> bool:
                return pattern.fullmatch(t) is not None and lo <= p < hi

            rules.append(rule)
        return lambda t, p: any(rule(t, p) for rule in rules)
    pattern = _regex(args.topic or "")
    try:
        wanted = {int(x) for x in args.partitions.split(",")} if args.partitions else None
    except ValueError:
        raise CommandError("--partitions expects a comma separated list of numeric partition ids, but received: "
                           f"{args.partitions}") from None
    return lambda t, p: pattern.fullmatch(t) is not None and (wanted is None or p in wanted)


async def run(args: argparse.Namespace) -> int:
    timestamp = parse_time(args.time)
    selected = partition_filter(args)
    async with await Admin.connect(args.bootstrap_server, **admin_options(args)) as admin:
        topics = await admin.describe_topics(None)
        partitions = [TopicPartition(name, p.partition) for name, t in topics.items()
                      if not (args.exclude_internal_topics and t.is_internal)
                      for p in t.partitions if selected(name, p.partition)]
        if not partitions:
            raise CommandError("Could not match any topic-partitions with the specified filters")
        offsets = await admin.list_offsets(dict.fromkeys(partitions, timestamp))
    for tp in sorted(partitions, key=lambda tp: f"{tp.topic}-{tp.partition}"):
        listed = offsets.get(tp)
        if listed is not None and listed.offset >= 0:
            print(f"{tp.topic}:{tp.partition}:{listed.offset}")
    return 0
