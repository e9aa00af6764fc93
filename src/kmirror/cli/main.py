"""The `kmirror` command: one argparse subcommand group per module, each `add_parser(subparsers)`.

A command's `func(args)` returns an exit code, or a coroutine returning one. Expected failures
(`CommandError`, any client error: unreachable broker, TOPIC_ALREADY_EXISTS, ...) print one
`Error: ...` line to stderr and exit 1; never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import sys
from collections.abc import Sequence

from kmirror.cli.errors import CommandError
from kmirror.client.errors import KafkaClientError

COMMAND_MODULES = (
    "kmirror.cli.topics",
    "kmirror.cli.leader_election",
    "kmirror.cli.reassign_partitions",
    "kmirror.cli.configs",
    "kmirror.cli.mirrors",
    "kmirror.cli.features",
    "kmirror.cli.console_producer",
    "kmirror.cli.console_consumer",
    "kmirror.cli.dump_log",
    "kmirror.cli.transactions",
    "kmirror.cli.verify",
    "kmirror.cli.server",  # node and local clusters; may not exist in every build
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kmirror", description="kmirror: a Kafka-compatible broker and its tools")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.func(args)
        if inspect.iscoroutine(result):
            result = asyncio.run(result)
        return int(result or 0)
    except (CommandError, KafkaClientError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
