"""The `kmirror` command: one argparse subcommand group per module, each `add_parser(subparsers)`.

A command's `func(args)` returns an exit code, or a coroutine returning one. Expected failures
(`CommandError`, any client error: unreachable broker, TOPIC_ALREADY_EXISTS, ...) print one
`Error: ...` line to stderr and exit 1; never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.metadata
import inspect
import sys
from collections.abc import Sequence

from kmirror.cli.errors import CommandError
from kmirror.client.errors import KafkaClientError

COMMANDS: dict[str, str] = {
    "topics": "kmirror.cli.topics",
    "leader-election": "kmirror.cli.leader_election",
    "reassign-partitions": "kmirror.cli.reassign_partitions",
    "configs": "kmirror.cli.configs",
    "acls": "kmirror.cli.acls",
    "delegation-tokens": "kmirror.cli.delegation_tokens",
    "mirrors": "kmirror.cli.mirrors",
    "features": "kmirror.cli.features",
    "metadata-quorum": "kmirror.cli.metadata_quorum",
    "console-producer": "kmirror.cli.console_producer",
    "console-consumer": "kmirror.cli.console_consumer",
    "dump-log": "kmirror.cli.dump_log",
    "get-offsets": "kmirror.cli.get_offsets",
    "log-dirs": "kmirror.cli.log_dirs",
    "delete-records": "kmirror.cli.delete_records",
    "broker-api-versions": "kmirror.cli.broker_api_versions",
    "transactions": "kmirror.cli.transactions",
    "consumer-groups": "kmirror.cli.consumer_groups",
    "share-groups": "kmirror.cli.share_groups",
    "verify": "kmirror.cli.verify",
    # node and local clusters; may not exist in every build
    "server": "kmirror.cli.server",
    "cluster": "kmirror.cli.server",
    "demo": "kmirror.cli.server",
}
"""Each command and the module whose `add_parser` defines it."""


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command or, given a known command's name, of the commands of its
    module only: a command imports no other command's module (a node's start imports no client
    tool, a tool no other tool)."""
    parser = argparse.ArgumentParser(prog="kmirror", description="kmirror: a Kafka-compatible broker and its tools")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    modules = [COMMANDS[command]] if command in COMMANDS else list(dict.fromkeys(COMMANDS.values()))
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.add_parser(subparsers)
    # Kafka's tools all take --version ("Display Kafka version").
    for command_parser in (parser, *subparsers.choices.values()):
        command_parser.add_argument("--version", action="version", version=_version(),
                                    help="Display the kmirror version.")
    return parser


def _version() -> str:
    try:
        return f"kmirror {importlib.metadata.version('kmirror')}"
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return "kmirror (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(argv[0] if argv else None).parse_args(argv)
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
