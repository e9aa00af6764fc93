"""`kmirror leader-election`: kafka-leader-election.sh (preferred or unclean leader election).

Exactly one of `--topic T --partition P`, `--all-topic-partitions` or `--path-to-json-file F`
(`{"partitions": [{"topic": "t", "partition": 0}, ...]}`). Output follows Kafka's
LeaderElectionCommand: elected partitions, then partitions that already had a valid leader
(ELECTION_NOT_NEEDED), then one line per failed partition; any failure exits 1.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Mapping

from kmirror.cli.command_config import add_admin_arguments, admin_options
from kmirror.cli.errors import CommandError
from kmirror.client.admin import Admin, ElectionType
from kmirror.client.errors import KafkaError
from kmirror.types import TopicPartition

ELECTION_NOT_NEEDED = 84


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("leader-election", help="elect preferred or unclean leaders (kafka-leader-election.sh)")
    add_admin_arguments(p, "--admin.config")
    p.add_argument("--election-type", required=True, type=_election_type, metavar="PREFERRED|UNCLEAN",
                   help="PREFERRED: the first replica if it is in the ISR; UNCLEAN: any live replica "
                        "when the ISR has none (may lose data)")
    p.add_argument("--topic", help="topic of the partition to elect; requires --partition")
    p.add_argument("--partition", type=int, help="partition to elect; requires --topic")
    p.add_argument("--all-topic-partitions", action="store_true", help="elect every partition of every topic")
    p.add_argument("--path-to-json-file", metavar="FILE",
                   help='JSON file: {"partitions": [{"topic": "t", "partition": 0}, ...]}')
    p.set_defaults(func=run)


def _election_type(value: str) -> ElectionType:
    try:
        return ElectionType[value.upper()]
    except KeyError:
        raise argparse.ArgumentTypeError(f"election type must be PREFERRED or UNCLEAN, got '{value}'") from None


def partitions_from_args(args: argparse.Namespace) -> list[TopicPartition] | None:
    """The partitions to elect; None for all. Raises CommandError for an invalid combination."""
    chosen = [args.topic is not None, bool(args.all_topic_partitions), args.path_to_json_file is not None]
    if sum(chosen) != 1:
        raise CommandError("exactly one of --topic (with --partition), --all-topic-partitions "
                           "or --path-to-json-file is required")
    if args.partition is not None and args.topic is None:
        raise CommandError("--partition requires --topic")
    if args.topic is not None:
        if args.partition is None:
            raise CommandError("--partition is required with --topic")
        return [TopicPartition(args.topic, args.partition)]
    if args.all_topic_partitions:
        return None
    try:
        with open(args.path_to_json_file, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise CommandError(f"cannot read {args.path_to_json_file}: {exc.strerror}") from None
    return parse_partitions_json(text)


def parse_partitions_json(text: str) -> list[TopicPartition]:
    """Kafka's election JSON; duplicates are refused as kafka-leader-election.sh does."""
    try:
        data = json.loads(text)
        entries = data["partitions"]
        partitions = [TopicPartition(str(e["topic"]), int(e["partition"])) for e in entries]
    except (ValueError, KeyError, TypeError) as exc:
        raise CommandError(f"invalid election JSON (expected {{\"partitions\": [{{\"topic\": ..., "
                           f"\"partition\": ...}}]}}): {exc}") from None
    duplicates = sorted(tp for tp, n in Counter(partitions).items() if n > 1)
    if duplicates:
        raise CommandError("Replica election data contains duplicate partitions: "
                           + ", ".join(str(tp) for tp in duplicates))
    if not partitions:
        raise CommandError("the election JSON lists no partitions")
    return partitions


def format_results(election_type: ElectionType, results: Mapping[TopicPartition, KafkaError | None]) -> list[str]:
    """kafka-leader-election.sh lines, partitions in order."""
    succeeded = sorted(tp for tp, err in results.items() if err is None)
    noop = sorted(tp for tp, err in results.items() if err is not None and err.error_code == ELECTION_NOT_NEEDED)
    failed = sorted(
        (tp, err) for tp, err in results.items() if err is not None and err.error_code != ELECTION_NOT_NEEDED
    )
    lines: list[str] = []
    if succeeded:
        lines.append(f"Successfully completed leader election ({election_type.name}) for partitions "
                     + ", ".join(str(tp) for tp in succeeded))
    if noop:
        lines.append("Valid replica already elected for partitions " + ", ".join(str(tp) for tp in noop))
    for tp, err in failed:
        detail = err.error_name + (f": {err.error_message}" if err.error_message else "")
        lines.append(f"Error completing leader election ({election_type.name}) for partition: {tp}: {detail}")
    return lines


async def run(args: argparse.Namespace) -> int:
    partitions = partitions_from_args(args)
    async with await Admin.connect(args.bootstrap_server, **admin_options(args)) as admin:
        results = await admin.elect_leaders(args.election_type, partitions)
    for line in format_results(args.election_type, results):
        print(line)
    failed = sum(1 for e in results.values() if e is not None and e.error_code != ELECTION_NOT_NEEDED)
    if failed:
        raise CommandError(f"{failed} replica(s) could not be elected")
    return 0
