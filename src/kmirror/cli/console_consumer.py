"""`kmirror console-consumer`: kafka-console-consumer.sh on assigned partitions (no group)."""

from __future__ import annotations

import argparse
import asyncio
import sys

from kmirror.cli.common import add_bootstrap_argument, parse_key_values
from kmirror.cli.errors import CommandError
from kmirror.client.cluster import Cluster
from kmirror.client.consumer import EARLIEST, LATEST, Consumer, ConsumerRecord
from kmirror.client.errors import KafkaError
from kmirror.types import TopicPartition


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("console-consumer", help="print records to stdout (kafka-console-consumer.sh)")
    add_bootstrap_argument(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--from-beginning", action="store_true")
    p.add_argument("--partition", type=int)
    p.add_argument("--offset", default=None, help="a number, 'earliest' or 'latest' (needs --partition)")
    p.add_argument("--max-messages", type=int)
    p.add_argument("--timeout-ms", type=int, help="exit when no record arrived for this long")
    p.add_argument("--isolation-level", default="read_uncommitted", choices=["read_uncommitted", "read_committed"])
    p.add_argument("--property", action="append", metavar="KEY=VALUE",
                   help="print.key, print.offset, print.partition, print.timestamp, key.separator, line.separator")
    p.set_defaults(func=run)


class RecordFormatter:
    """Kafka's DefaultMessageFormatter: [timestamp][partition][offset][key]value, tab-separated."""

    def __init__(self, properties: dict[str, str]) -> None:
        def flag(name: str) -> bool:
            return properties.get(name, "false").lower() == "true"

        self.print_timestamp = flag("print.timestamp")
        self.print_partition = flag("print.partition")
        self.print_offset = flag("print.offset")
        self.print_key = flag("print.key")
        self.key_separator = properties.get("key.separator", "\t")
        self.null_literal = properties.get("null.literal", "null")

    def format(self, cr: ConsumerRecord) -> str:
        r = cr.record
        parts: list[str] = []
        if self.print_timestamp:
            kind = "LogAppendTime" if cr.timestamp_type == 1 else "CreateTime"
            parts.append(f"{kind}:{r.timestamp}")
        if self.print_partition:
            parts.append(f"Partition:{cr.topic_partition.partition}")
        if self.print_offset:
            parts.append(f"Offset:{r.offset}")
        prefix = "".join(p + "\t" for p in parts)
        key = self.key_separator.join([self._text(r.key), ""]) if self.print_key else ""
        return f"{prefix}{key}{self._text(r.value)}"

    def _text(self, data: bytes | None) -> str:
        return self.null_literal if data is None else data.decode("utf-8", errors="replace")


def start_offsets(args: argparse.Namespace, partitions: list[int]) -> dict[TopicPartition, int | str]:
    if args.offset is not None and args.partition is None:
        raise CommandError("--offset requires --partition")
    if args.partition is not None:
        if args.partition not in partitions:
            raise CommandError(f"topic {args.topic} has no partition {args.partition}")
        offset = args.offset if args.offset is not None else (EARLIEST if args.from_beginning else LATEST)
        if offset not in (EARLIEST, LATEST):
            if not offset.lstrip("-").isdigit() or int(offset) < 0:
                raise CommandError(f"--offset must be a number >= 0, 'earliest' or 'latest', got '{offset}'")
            offset = int(offset)
        return {TopicPartition(args.topic, args.partition): offset}
    start = EARLIEST if args.from_beginning else LATEST
    return {TopicPartition(args.topic, p): start for p in partitions}


async def run(args: argparse.Namespace) -> int:
    formatter = RecordFormatter(parse_key_values(args.property, "--property"))
    isolation = 1 if args.isolation_level == "read_committed" else 0
    count = 0
    async with Cluster(args.bootstrap_server, request_timeout_ms=args.command_timeout_ms) as cluster:
        await cluster.refresh([args.topic])
        topic = cluster.metadata.topics.get(args.topic)
        if topic is None or topic.error_code:
            raise KafkaError(topic.error_code if topic else 3, context=args.topic)
        consumer = Consumer(cluster, isolation_level=isolation)
        await consumer.assign(start_offsets(args, list(topic.partitions)))
        loop = asyncio.get_running_loop()
        last_record_at = loop.time()
        while args.max_messages is None or count < args.max_messages:
            records = await consumer.poll()
            for cr in records:
                print(formatter.format(cr), flush=False)
                count += 1
                if args.max_messages is not None and count >= args.max_messages:
                    break
            sys.stdout.flush()
            if records:
                last_record_at = loop.time()
            elif args.timeout_ms is not None and (loop.time() - last_record_at) * 1000 >= args.timeout_ms:
                break
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0
