"""`kmirror transactions`: kafka-transactions.sh's `list`, `describe` and `describe-producers`
(KIP-664), as `--list` (filters `--state`, `--producer-id`, `--duration-filter`),
`--describe --transactional-id ID` and `--describe-producers --topic T --partition P`, with
kafka-transactions.sh's columns."""

from __future__ import annotations

import argparse
import time

from kmirror.cli.common import add_bootstrap_argument
from kmirror.cli.errors import CommandError
from kmirror.client.admin import Admin
from kmirror.types import TopicPartition


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("transactions", help="list and describe transactions (kafka-transactions.sh)")
    add_bootstrap_argument(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true")
    action.add_argument("--describe", action="store_true")
    action.add_argument("--describe-producers", action="store_true",
                        help="the producers a partition keeps state for (with --topic and --partition)")
    p.add_argument("--transactional-id")
    p.add_argument("--topic")
    p.add_argument("--partition", type=int)
    p.add_argument("--state", action="append", metavar="STATE",
                   help="only transactions in this state, e.g. Ongoing (repeatable)")
    p.add_argument("--producer-id", action="append", type=int, help="only this producer id (repeatable)")
    p.add_argument("--duration-filter", type=int, default=-1, metavar="MS",
                   help="only transactions running longer than this")
    p.set_defaults(func=run)


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("\t".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())


def _or_none(value: int) -> str:
    return "None" if value < 0 else str(value)


async def run(args: argparse.Namespace) -> int:
    if args.describe and not args.transactional_id:
        raise CommandError("--describe needs --transactional-id")
    if args.describe_producers and (args.topic is None or args.partition is None):
        raise CommandError("--describe-producers needs --topic and --partition")
    async with await Admin.connect(args.bootstrap_server, request_timeout_ms=args.command_timeout_ms) as admin:
        if args.describe_producers:
            producers = await admin.describe_producers(TopicPartition(args.topic, args.partition))
            rows = [["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                     "CurrentTransactionStartOffset"]]
            rows += [[str(p.producer_id), str(p.producer_epoch), _or_none(p.coordinator_epoch),
                      str(p.last_sequence), str(p.last_timestamp), _or_none(p.current_transaction_start_offset)]
                     for p in producers]
            _table(rows)
            return 0
        if args.list:
            listed = await admin.list_transactions(args.state, args.producer_id, args.duration_filter)
            rows = [["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]]
            rows += [[t.transactional_id, str(t.coordinator_id), str(t.producer_id), t.state] for t in listed]
            _table(rows)
            return 0
        d = await admin.describe_transaction(args.transactional_id)
        now_ms = int(time.time() * 1000)
        duration = str(now_ms - d.transaction_start_time_ms) if d.transaction_start_time_ms >= 0 else "None"
        start = str(d.transaction_start_time_ms) if d.transaction_start_time_ms >= 0 else "None"
        partitions = ",".join(f"{tp.topic}-{tp.partition}" for tp in d.partitions)
        _table([["TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState", "TransactionTimeoutMs",
                 "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"],
                [d.transactional_id, str(d.producer_id), str(d.producer_epoch), d.state,
                 str(d.transaction_timeout_ms), start, duration, partitions]])
        return 0
