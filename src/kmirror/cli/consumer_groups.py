"""`kmirror consumer-groups`: kafka-consumer-groups.sh (Kafka's `ConsumerGroupCommand`) for classic
and KIP-848 consumer groups.

  --list [--state [S,...]] [--type [classic,consumer]]
  --describe (--group G ... | --all-groups) [--offsets | --members | --state] [--verbose]
  --reset-offsets (--group G ... | --all-groups) (--topic T[:P,...] ... | --all-topics) SCENARIO
                  [--dry-run | --execute]
  --delete (--group G ... | --all-groups)
  --delete-offsets --group G --topic T[:P,...] ...

Output columns and messages are Kafka's (`kmirror.cli.consumer_groups_output`); the offsets
reset follows Kafka's `GroupOffsetsResetter` (`kmirror.cli.group_offsets_reset`) and is refused
for a group with active members. A failure prints `Error: ...` on stderr and the command exits 1
once the other groups are done.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kmirror.cli import consumer_groups_output as out
from kmirror.cli import group_offsets_reset as reset
from kmirror.cli.command_config import add_admin_arguments, admin_options
from kmirror.cli.consumer_groups_output import PartitionAssignmentState
from kmirror.cli.errors import CommandError
from kmirror.client.admin import LATEST_TIMESTAMP, Admin
from kmirror.client.errors import KafkaError
from kmirror.client.groups import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerGroupDescription,
    ListedGroup,
    OffsetAndMetadata,
)
from kmirror.types import TopicPartition

CONSUMER_GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty", "Assigning",
                         "Reconciling")
GROUP_TYPES = ("classic", "consumer")
GROUP_LEVEL_ERRORS = ("INVALID_GROUP_ID", "GROUP_ID_NOT_FOUND", "GROUP_AUTHORIZATION_FAILED", "NON_EMPTY_GROUP")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("consumer-groups", help="list, describe, reset and delete consumer groups "
                                                      "(kafka-consumer-groups.sh)")
    add_admin_arguments(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list all consumer groups")
    action.add_argument("--describe", action="store_true", help="describe groups: offsets and lag (default), "
                                                                "--members or --state")
    action.add_argument("--delete", action="store_true", help="delete groups (only groups with no members)")
    action.add_argument("--reset-offsets", action="store_true",
                        help="reset offsets of inactive groups (dry run unless --execute)")
    action.add_argument("--delete-offsets", action="store_true",
                        help="delete a group's offsets of topics it does not consume")
    p.add_argument("--group", action="append", metavar="GROUP", help="the consumer group (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="every consumer group")
    p.add_argument("--topic", action="append", metavar="TOPIC[:P,...]",
                   help="a topic, or some of its partitions as t:0,1 (repeatable)")
    p.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for (--reset-offsets)")
    p.add_argument("--members", action="store_true", help="describe the members (--describe)")
    p.add_argument("--offsets", action="store_true", help="describe offsets and lag, the default (--describe)")
    p.add_argument("--verbose", action="store_true", help="more columns (--describe)")
    p.add_argument("--state", nargs="?", const="", metavar="STATE[,STATE]",
                   help="--describe: the group's state; --list: show states, or only groups in these")
    p.add_argument("--type", nargs="?", const="", metavar="TYPE[,TYPE]",
                   help="--list: show types, or only groups of these (classic, consumer)")
    p.add_argument("--timeout", type=int, metavar="MS", help="request timeout (default: 30000)")
    reset.add_reset_arguments(p, "the committed offset")
    p.set_defaults(func=run)


def _option(name: str) -> str:
    return "--" + name.replace("_", "-")


def validate(args: argparse.Namespace) -> None:
    """Kafka's `ConsumerGroupCommandOptions.checkArgs`."""
    scope = "--all-groups, --group"
    if args.group and args.all_groups:
        raise CommandError('Option "--group" can\'t be used with option "--all-groups"')
    if args.list and args.group:
        raise CommandError('Option "--group" can\'t be used with option "--list"')
    if (args.list or args.describe) and args.topic:
        raise CommandError(f'Option "--topic" can\'t be used with option "{"--list" if args.list else "--describe"}"')
    if not args.describe and (args.members or args.offsets or args.verbose):
        raise CommandError("Options --members, --offsets and --verbose may only be used with --describe")
    if not (args.describe or args.list) and args.state is not None:
        raise CommandError("Option --state may only be used with --describe or --list")
    if not args.list and args.type is not None:
        raise CommandError("Option --type may only be used with --list")
    if not args.reset_offsets and (args.all_topics or args.dry_run or args.execute
                                   or any(_scenario_given(args, s) for s in reset.SCENARIOS)):
        raise CommandError("Options --all-topics, --dry-run, --execute and the reset scenarios may only be used "
                           "with --reset-offsets")
    if args.describe:
        if not (args.group or args.all_groups):
            raise CommandError(f"Option --describe takes one of these options: {scope}")
        if sum([args.members, args.offsets, args.state is not None]) > 1:
            raise CommandError("Option --describe takes at most one of these options: --members, --offsets, --state")
        if args.state:
            raise CommandError("Option --describe does not take a value for --state")
    if args.delete:
        if not (args.group or args.all_groups):
            raise CommandError(f"Option --delete takes one of these options: {scope}")
        if args.topic:
            raise CommandError("The consumer does not support topic-specific offset deletion from a consumer group.")
    if args.delete_offsets and (not args.group or not args.topic or len(args.group) > 1):
        raise CommandError("Option --delete-offsets takes the following options: --group (one), --topic")
    if args.reset_offsets:
        if not (args.group or args.all_groups):
            raise CommandError(f"Option --reset-offsets takes one of these options: {scope}")
        if not any(_scenario_given(args, s) for s in reset.SCENARIOS):
            raise CommandError("Option --reset-offsets requires one of the following scenarios: "
                               + ", ".join(_option(s) for s in reset.SCENARIOS))
        if not (args.topic or args.all_topics):
            raise CommandError("One of the reset scopes should be defined: --all-topics, --topic.")
        if args.topic and args.all_topics:
            raise CommandError('Option "--topic" can\'t be used with option "--all-topics"')


def _scenario_given(args: argparse.Namespace, name: str) -> bool:
    value = getattr(args, name)
    return value is not None and value is not False


def parse_states(value: str) -> list[str]:
    """`stable,empty` -> Kafka's state names; an unknown one is an error naming the valid states."""
    by_lower = {s.lower(): s for s in CONSUMER_GROUP_STATES}
    names = [s.strip() for s in value.split(",") if s.strip()]
    if any(s.lower() not in by_lower for s in names):
        raise CommandError(f"Invalid state list '{value}'. Valid states are: {', '.join(CONSUMER_GROUP_STATES)}")
    return [by_lower[s.lower()] for s in names]


def parse_types(value: str) -> list[str]:
    names = [t.strip().lower() for t in value.split(",") if t.strip()]
    if any(t not in GROUP_TYPES for t in names):
        raise CommandError(f"Invalid types list '{value}'. Valid types are: Classic, Consumer")
    return names


def is_consumer_group(g: ListedGroup) -> bool:
    """Kafka's `ListGroupsOptions.forConsumerGroups`: classic or consumer type, and the `consumer`
    protocol or none (a group that only commits offsets)."""
    return g.group_type in ("", *GROUP_TYPES) and g.protocol_type in ("", CONSUMER_PROTOCOL_TYPE)


def _emit(lines: Sequence[str]) -> None:
    print("\n".join(lines))


def _error(message: str) -> None:
    print(f"Error: {message}", file=sys.stderr)


async def run(args: argparse.Namespace) -> int:
    validate(args)
    if args.reset_offsets and not (args.dry_run or args.execute):
        print(reset.NO_EXECUTE_WARNING, file=sys.stderr)
    options = admin_options(args)
    if args.timeout is not None:
        options["request_timeout_ms"] = args.timeout
    async with await Admin.connect(args.bootstrap_server, **options) as admin:
        if args.list:
            return await list_groups(admin, args)
        groups = args.group or [g.group_id for g in await admin.list_groups() if is_consumer_group(g)]
        if args.describe:
            return await describe_groups(admin, groups, args)
        if args.delete:
            return await delete_groups(admin, groups)
        if args.delete_offsets:
            return await delete_offsets(admin, groups[0], args.topic)
        return await reset_offsets(admin, groups, args)


async def list_groups(admin: Admin, args: argparse.Namespace) -> int:
    states = parse_states(args.state) if args.state else []
    types = parse_types(args.type) if args.type else []
    listed = [g for g in await admin.list_groups(states, types) if is_consumer_group(g)
              and (not states or g.state in states) and (not types or not g.group_type or g.group_type in types)]
    if args.state is None and args.type is None:
        for g in listed:
            print(g.group_id)
    else:
        _emit(out.list_table(listed, include_type=args.type is not None, include_state=args.state is not None))
    return 0


async def describe_groups(admin: Admin, groups: Sequence[str], args: argparse.Namespace) -> int:
    failed = False
    for group_id, description in sorted((await admin.describe_consumer_groups(groups)).items()):
        if args.members:
            rows: int | None = len(description.members)
        elif args.state is not None:
            rows = 1
        else:
            offset_rows = await collect_offsets(admin, description)
            rows = len(offset_rows)
        error, notice, show = out.group_state_message(group_id, description.state, rows)
        if error is not None:
            _error(error)
            failed = True
        if notice is not None:
            print(f"\n{notice}", file=sys.stderr)
        if not show:
            continue
        if args.members:
            _emit(out.members_table(description, verbose=args.verbose))
        elif args.state is not None:
            _emit(out.state_table(description, verbose=args.verbose))
        else:
            _emit(out.offsets_table(offset_rows, verbose=args.verbose))
    return 1 if failed else 0


async def collect_offsets(admin: Admin, description: ConsumerGroupDescription) -> list[PartitionAssignmentState]:
    """Kafka's `collectGroupsOffsets`: the partitions of each member with an assignment (the
    members with most partitions first), then those the group has offsets for that no member
    is assigned, with `-` for the consumer."""
    group_id = description.group_id
    if description.state == "Dead":
        return []
    committed = await admin.list_consumer_group_offsets(group_id)
    members = sorted((m for m in description.members if m.assignment), key=lambda m: -len(m.assignment))
    assigned = {tp for m in members for tp in m.assignment}
    unassigned = sorted(set(committed) - assigned)
    log_end = await reset.log_offsets(admin, [*assigned, *unassigned], LATEST_TIMESTAMP)

    def row(tp: TopicPartition, consumer_id: str = out.MISSING, host: str = out.MISSING,
            client_id: str = out.MISSING) -> PartitionAssignmentState:
        c = committed.get(tp)
        return PartitionAssignmentState(
            group_id, tp.topic, tp.partition, None if c is None else c.offset, log_end.get(tp), consumer_id, host,
            client_id, None if c is None or c.leader_epoch < 0 else c.leader_epoch)

    rows = [row(tp, m.consumer_id, m.host, m.client_id) for m in members for tp in sorted(m.assignment)]
    return rows + [row(tp) for tp in unassigned]


async def reset_offsets(admin: Admin, groups: Sequence[str], args: argparse.Namespace) -> int:
    """Kafka's `resetOffsets`: only groups that are Empty or do not exist (Dead) are reset."""
    scenario = reset.ResetScenario(args.to_earliest, args.to_latest, args.to_current, args.to_offset,
                                   args.shift_by, args.to_datetime, args.by_duration)
    plan: dict[str, dict[TopicPartition, int]] = {}
    failed = False
    for group_id, description in (await admin.describe_consumer_groups(groups)).items():
        if description.state not in ("Empty", "Dead"):
            _error(f"Assignments can only be reset if the group '{group_id}' is inactive, but the current state "
                   f"is {description.state}.")
            failed = True
            continue
        committed = await admin.list_consumer_group_offsets(group_id)
        offsets = await reset.planned_offsets(admin, args, scenario, committed)
        if args.execute and offsets:
            results = await admin.alter_consumer_group_offsets(
                group_id, {tp: OffsetAndMetadata(o) for tp, o in offsets.items()})
            errors = [e for e in results.values() if e is not None]
            if errors:
                raise errors[0]
        plan[group_id] = offsets
    if any(plan.values()):
        _emit(out.reset_table(plan))
    return 1 if failed else 0


async def delete_groups(admin: Admin, groups: Sequence[str]) -> int:
    results = await admin.delete_consumer_groups(groups)
    deleted = [g for g, e in results.items() if e is None]
    quoted = ", ".join(f"'{g}'" for g in deleted)
    failures = {g: e for g, e in results.items() if e is not None}
    if not failures:
        print(f"Deletion of requested consumer groups ({quoted}) was successful.")
        return 0
    _error("Deletion of some consumer groups failed:")
    for g, e in failures.items():
        print(f"* Group '{g}' could not be deleted due to: {out.kafka_message(e)}", file=sys.stderr)
    if deleted:
        print(f"\nThese consumer groups were deleted successfully: {quoted}")
    return 1


async def delete_offsets(admin: Admin, group_id: str, topics: Sequence[str]) -> int:
    """Kafka's `deleteOffsets`: the partitions named, or all of a topic's; a topic that cannot
    be described is a row of its own (partition `-`)."""
    statuses: dict[TopicPartition, str | None] = {}
    partitions: set[TopicPartition] = set()
    for t in topics:
        if ":" in t:
            partitions.update(reset.parse_topic_partitions(t))
            continue
        try:
            described = await admin.describe_topics([t])
        except KafkaError as exc:
            statuses[TopicPartition(t, -1)] = out.kafka_message(exc)
            continue
        partitions.update(TopicPartition(t, p.partition) for p in described[t].partitions)
    top_level: KafkaError | None = None
    try:
        results = await admin.delete_consumer_group_offsets(group_id, partitions) if partitions else {}
    except KafkaError as exc:
        top_level, results = exc, dict.fromkeys(partitions, exc)
    for tp in partitions:
        error = results.get(tp)
        statuses[tp] = None if error is None else out.kafka_message(error)
    if top_level is not None and top_level.error_name in GROUP_LEVEL_ERRORS:
        _error(out.KAFKA_MESSAGES[top_level.error_name])
    elif top_level is not None:
        _error(f"Encountered some unknown error: {top_level.error_name}")
    elif any(e is not None for e in results.values()):
        _error("Encountered some partition-level error, see the follow-up details.")
    else:
        print(f"Request succeeded for deleting offsets from group {group_id}.")
    _emit(out.delete_offsets_table(statuses))
    return 1 if any(s is not None for s in statuses.values()) else 0
