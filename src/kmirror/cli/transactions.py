"""`kmirror transactions`: kafka-transactions.sh (KIP-664), each action named as Kafka's tool
does (`list`, `describe`, ...) or as a flag: `--list` (filters `--state`,
`--producer-id`, `--duration-filter`, `--transactional-id-pattern`), `--describe --transactional-id ID`,
`--describe-producers --topic T --partition P [--broker-id N]`,
`--find-hanging (--broker-id N | --topic T [--partition P]) [--max-transaction-timeout MIN]` and
`--abort --topic T --partition P (--start-offset N | --producer-id X --producer-epoch E
--coordinator-epoch C)`, with kafka-transactions.sh's columns and messages.

A hanging transaction is open on a partition (its producer's state there has a transaction
start offset), idle for longer than the largest transaction timeout, and unknown to the
transaction coordinator: no transactional id has that producer id, or the id's transaction
does not include the partition. Only an ABORT marker written through `--abort` ends it, and
until then it holds the partition's last stable offset (read_committed consumers stop there).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping
from dataclasses import dataclass

from kmirror.cli.command_config import add_admin_arguments, admin_options
from kmirror.cli.errors import CommandError
from kmirror.client.admin import Admin
from kmirror.client.errors import KafkaError
from kmirror.client.transactions import ProducerStateDescription, TransactionDescription
from kmirror.types import TopicPartition

TRANSACTIONAL_ID_NOT_FOUND = 105
PRODUCERS_HEADERS = ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                     "CurrentTransactionStartOffset"]
HANGING_HEADERS = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)"]


COMMANDS = ("list", "describe", "describe-producers", "find-hanging", "abort")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("transactions", help="list, describe, find and abort transactions (kafka-transactions.sh)")
    add_admin_arguments(p)
    p.add_argument("command", nargs="?", choices=COMMANDS,
                   help="kafka-transactions.sh's form of the action: list, describe, ... (or --list, --describe, ...)")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--list", action="store_true")
    action.add_argument("--describe", action="store_true")
    action.add_argument("--describe-producers", action="store_true",
                        help="the producers a partition keeps state for (with --topic and --partition)")
    action.add_argument("--find-hanging", action="store_true",
                        help="open transactions the coordinator no longer knows (with --broker-id or --topic)")
    action.add_argument("--abort", action="store_true",
                        help="abort a hanging transaction (with --topic, --partition and --start-offset)")
    p.add_argument("--transactional-id")
    p.add_argument("--topic")
    p.add_argument("--partition", type=int)
    p.add_argument("--broker-id", type=int, help="the replica to ask (--describe-producers), or whose partitions "
                   "to search (--find-hanging)")
    p.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES",
                   help="--find-hanging: only transactions idle for longer than this (default 15)")
    p.add_argument("--start-offset", type=int, help="--abort: the first offset of the transaction to abort")
    p.add_argument("--producer-epoch", type=int)
    p.add_argument("--coordinator-epoch", type=int)
    p.add_argument("--state", action="append", metavar="STATE",
                   help="only transactions in this state, e.g. Ongoing (repeatable)")
    p.add_argument("--producer-id", action="append", type=int, help="only this producer id (repeatable)")
    p.add_argument("--duration-filter", type=int, default=-1, metavar="MS",
                   help="only transactions running longer than this")
    p.add_argument("--transactional-id-pattern", metavar="REGEX",
                   help="only transactional ids this regular expression matches whole (KIP-1152)")
    p.set_defaults(func=run)


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("\t".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip())


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    tp: TopicPartition
    producer: ProducerStateDescription


def open_transactions(producers: Mapping[TopicPartition, list[ProducerStateDescription]], now_ms: int,
                      max_timeout_ms: int) -> list[OpenTransaction]:
    """The transactions open on these partitions whose producer wrote nothing for longer than
    `max_timeout_ms` (no live transaction can have been open that long)."""
    return [OpenTransaction(tp, p) for tp, states in producers.items() for p in states
            if p.current_transaction_start_offset >= 0 and now_ms - p.last_timestamp > max_timeout_ms]


def hanging(candidates: list[OpenTransaction], transactional_ids: Mapping[int, str],
            descriptions: Mapping[str, TransactionDescription | None]) -> list[OpenTransaction]:
    """Kafka's FindHangingTransactionsCommand: a candidate is hanging when no transactional id
    has its producer id, the id is not found, or the id's transaction (ongoing, or waiting
    for markers) does not name the partition."""
    out = []
    for candidate in candidates:
        transactional_id = transactional_ids.get(candidate.producer.producer_id)
        description = None if transactional_id is None else descriptions.get(transactional_id)
        if description is None or candidate.tp not in description.partitions:
            out.append(candidate)
    return out


async def _find_hanging(admin: Admin, args: argparse.Namespace) -> list[OpenTransaction]:
    if args.topic is None and args.broker_id is None:
        raise CommandError("The `find-hanging` command requires either --topic or --broker-id to limit the scope "
                           "of the search")
    if args.partition is not None and args.topic is None:
        raise CommandError("The --partition argument requires --topic to be provided")
    if args.topic is not None and args.partition is not None:
        tps = [TopicPartition(args.topic, args.partition)]
    else:
        topics = await admin.describe_topics(None if args.topic is None else [args.topic])
        tps = [TopicPartition(name, p.partition) for name, t in topics.items() for p in t.partitions
               if args.broker_id is None or args.broker_id in p.replicas]
    producers = await admin.describe_producers_of(tps, args.broker_id)
    candidates = open_transactions(producers, int(time.time() * 1000), args.max_transaction_timeout * 60_000)
    if not candidates:
        return []
    pids = sorted({c.producer.producer_id for c in candidates})
    transactional_ids = {t.producer_id: t.transactional_id for t in await admin.list_transactions(producer_ids=pids)}
    descriptions: dict[str, TransactionDescription | None] = {}
    for transactional_id in sorted(set(transactional_ids.values())):
        try:
            descriptions[transactional_id] = await admin.describe_transaction(transactional_id)
        except KafkaError as e:
            if e.error_code != TRANSACTIONAL_ID_NOT_FOUND:
                raise
            descriptions[transactional_id] = None
    return hanging(candidates, transactional_ids, descriptions)


async def _abort(admin: Admin, args: argparse.Namespace) -> None:
    if args.topic is None or args.partition is None:
        raise CommandError("--abort needs --topic and --partition")
    tp = TopicPartition(args.topic, args.partition)
    if args.start_offset is not None:
        found = [p for p in await admin.describe_producers(tp) if p.current_transaction_start_offset == args.start_offset]
        if not found:
            raise CommandError(f"Could not find any open transactions starting at offset {args.start_offset} "
                               f"on partition {tp.topic}-{tp.partition}")
        producer_id, producer_epoch, coordinator_epoch = found[0].producer_id, found[0].producer_epoch, \
            found[0].coordinator_epoch
    elif args.producer_id:
        if args.producer_epoch is None:
            raise CommandError("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            raise CommandError("Missing required argument --coordinator-epoch")
        producer_id, producer_epoch, coordinator_epoch = args.producer_id[0], args.producer_epoch, \
            args.coordinator_epoch
    else:
        raise CommandError("The transaction to abort must be identified either with --start-offset or with "
                           "--producer-id, --producer-epoch, and --coordinator-epoch")
    # a transaction that hung before its producer's first marker has no coordinator epoch: 0 is
    # at most any epoch a marker could carry (Kafka's choice)
    await admin.abort_transaction(tp, producer_id, producer_epoch, max(coordinator_epoch, 0))


def select_action(args: argparse.Namespace) -> None:
    """Exactly one action, named as kafka-transactions.sh does (`list`) or as a flag (`--list`)."""
    flags = [c for c in COMMANDS if getattr(args, c.replace("-", "_"))]
    if args.command is not None and flags and flags != [args.command]:
        raise CommandError(f"{args.command} and --{flags[0]} are two actions: give one")
    if args.command is None and not flags:
        raise CommandError(f"one of the actions {', '.join(COMMANDS)} is required")
    if args.command is not None:
        setattr(args, args.command.replace("-", "_"), True)


async def run(args: argparse.Namespace) -> int:
    select_action(args)
    if args.describe and not args.transactional_id:
        raise CommandError("--describe needs --transactional-id")
    if args.describe_producers and (args.topic is None or args.partition is None):
        raise CommandError("--describe-producers needs --topic and --partition")
    async with await Admin.connect(args.bootstrap_server, **admin_options(args)) as admin:
        if args.describe_producers:
            producers = await admin.describe_producers(TopicPartition(args.topic, args.partition), args.broker_id)
            _table([PRODUCERS_HEADERS] + [
                [str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch), str(p.last_sequence),
                 str(p.last_timestamp),
                 "None" if p.current_transaction_start_offset < 0 else str(p.current_transaction_start_offset)]
                for p in producers])
            return 0
        if args.find_hanging:
            now_ms = int(time.time() * 1000)
            _table([HANGING_HEADERS] + [
                [h.tp.topic, str(h.tp.partition), str(h.producer.producer_id), str(h.producer.producer_epoch),
                 str(h.producer.coordinator_epoch), str(h.producer.current_transaction_start_offset),
                 str(h.producer.last_timestamp), str((now_ms - h.producer.last_timestamp) // 60_000)]
                for h in await _find_hanging(admin, args)])
            return 0
        if args.abort:
            await _abort(admin, args)
            return 0
        if args.list:
            listed = await admin.list_transactions(args.state, args.producer_id, args.duration_filter,
                                                   args.transactional_id_pattern)
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
