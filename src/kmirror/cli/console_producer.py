"""`kmirror console-producer`: kafka-console-producer.sh, one record per stdin line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator

from kmirror.cli.common import add_bootstrap_argument, parse_key_values
from kmirror.cli.errors import CommandError
from kmirror.client.cluster import Cluster
from kmirror.client.producer import Producer
from kmirror.records.builder import SimpleRecord
from kmirror.records.compression import CompressionType

BATCH_RECORDS = 500


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("console-producer", help="produce stdin lines (kafka-console-producer.sh)")
    add_bootstrap_argument(p)
    p.add_argument("--topic", required=True)
    p.add_argument("--partition", type=int, help="send every record to this partition")
    p.add_argument("--property", action="append", metavar="KEY=VALUE",
                   help="parse.key=true, key.separator=SEP, null.marker=MARKER")
    p.add_argument("--compression-codec", nargs="?", const="gzip", default="none",
                   choices=["none", "gzip", "snappy", "lz4", "zstd"])
    p.add_argument("--request-required-acks", default="-1", choices=["-1", "all", "0", "1"])
    p.add_argument("--request-timeout-ms", type=int, default=30_000)
    p.set_defaults(func=run)


class LineParser:
    """kafka-console-producer's LineMessageReader: `key<sep>value` with parse.key=true."""

    def __init__(self, properties: dict[str, str]) -> None:
        self.parse_key = properties.get("parse.key", "false").lower() == "true"
        self.key_separator = properties.get("key.separator", "\t")
        self.null_marker = properties.get("null.marker")
        self.ignore_error = properties.get("ignore.error", "false").lower() == "true"

    def parse(self, line: str) -> SimpleRecord:
        key: str | None = None
        value: str | None = line
        if self.parse_key:
            k, sep, v = line.partition(self.key_separator)
            if sep:
                key, value = k, v
            elif not self.ignore_error:
                raise CommandError(f"no key separator '{self.key_separator}' in line '{line}'")
        if self.null_marker is not None:
            key = None if key == self.null_marker else key
            value = None if value == self.null_marker else value
        return SimpleRecord(None if key is None else key.encode(), None if value is None else value.encode())


def chunks(lines: Iterable[str], size: int) -> Iterator[list[str]]:
    chunk: list[str] = []
    for line in lines:
        chunk.append(line.rstrip("\r\n"))
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


async def run(args: argparse.Namespace) -> int:
    parser = LineParser(parse_key_values(args.property, "--property"))
    acks = -1 if args.request_required_acks in ("-1", "all") else int(args.request_required_acks)
    codec = int(CompressionType.from_name(args.compression_codec))
    async with Cluster(args.bootstrap_server, request_timeout_ms=args.command_timeout_ms) as cluster:
        producer = Producer(cluster, acks=acks, compression=codec, timeout_ms=args.request_timeout_ms)
        await producer.partition_count(args.topic)  # fail fast on an unknown topic
        # Lines are read in chunks so a pipe of millions of lines is not held in memory; an
        # interactive terminal gets each line sent as soon as it is typed.
        size = 1 if sys.stdin.isatty() else BATCH_RECORDS
        for chunk in chunks(sys.stdin, size):
            await producer.send(args.topic, [parser.parse(line) for line in chunk], partition=args.partition)
    return 0
