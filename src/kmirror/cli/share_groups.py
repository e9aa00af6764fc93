"""`kmirror share-groups`: kafka-share-groups.sh (Kafka's `ShareGroupCommand`) for KIP-932 share
groups.

  --list [--state [S,...]]
  --describe (--group G ... | --all-groups) [--offsets | --members | --state] [--verbose]
  --delete (--group G ... | --all-groups)
  --reset-offsets (--group G ... | --all-groups) (--topic T[:P,...] ... | --all-topics) SCENARIO
                  [--dry-run | --execute]

`--reset-offsets` takes `kmirror consumer-groups`' scenarios (`--to-earliest`, `--to-latest`,
`--to-offset`, `--shift-by`, `--to-datetime`, `--by-duration`, `--to-current`) and sets the
share-partition start offsets with AlterShareGroupOffsets, only for a group without members.
`--describe` shows each partition's share-partition start offset and its lag to the log end
offset by default. A failure prints `Error: ...` on stderr and the command exits 1 once the
other groups are done.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kmirror.cli import consumer_groups_output as out
from kmirror.cli import group_offsets_reset as reset
from kmirror.cli.command_config import add_admin_arguments, admin_options
from kmirror.cli.errors import CommandError
from kmirror.cli.group_offsets_reset import log_offsets
from kmirror.client.admin import LATEST_TIMESTAMP, Admin
from kmirror.client.errors import KafkaError
from kmirror.client.groups import ConsumerGroupDescription, OffsetAndMetadata
from kmirror.types import TopicPartition

SHARE_GROUP_STATES = ("Stable", "Empty", "Dead")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("share-groups", help="list, describe and delete share groups (kafka-share-groups.sh)")
    add_admin_arguments(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true", help="list all share groups")
    action.add_argument("--describe", action="store_true", help="describe groups: start offsets and lag (default), "
                                                                "--members or --state")
    action.add_argument("--delete", action="store_true", help="delete groups (only groups with no members)")
    action.add_argument("--reset-offsets", action="store_true",
                        help="reset the start offsets of groups without members (dry run unless --execute)")
    p.add_argument("--group", action="append", metavar="GROUP", help="the share group (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="every share group")
    p.add_argument("--members", action="store_true", help="describe the members (--describe)")
    p.add_argument("--offsets", action="store_true", help="describe start offsets and lag, the default (--describe)")
    p.add_argument("--verbose", action="store_true", help="more columns (--describe)")
    p.add_argument("--state", nargs="?", const="", metavar="STATE[,STATE]",
                   help="--describe: the group's state; --list: show states, or only groups in these")
    p.add_argument("--topic", action="append", metavar="TOPIC[:P,...]",
                   help="a topic, or some of its partitions as t:0,1 (repeatable; --reset-offsets)")
    p.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for (--reset-offsets)")
    p.add_argument("--timeout", type=int, metavar="MS", help="request timeout (default: 30000)")
    reset.add_reset_arguments(p, "the start offset")
    p.set_defaults(func=run)


def validate(args: argparse.Namespace) -> None:
    if args.group and args.all_groups:
        raise CommandError('Option "--group" can\'t be used with option "--all-groups"')
    if args.list and args.group:
        raise CommandError('Option "--group" can\'t be used with option "--list"')
    if not args.describe and (args.members or args.offsets or args.verbose):
        raise CommandError("Options --members, --offsets and --verbose may only be used with --describe")
    if args.delete and args.state is not None:
        raise CommandError("Option --state may only be used with --describe or --list")
    if args.reset_offsets:
        if not any(getattr(args, n) not in (None, False) for n in reset.SCENARIOS):
            raise CommandError("Option --reset-offsets requires one of the following scenarios: "
                               + ", ".join("--" + n.replace("_", "-") for n in reset.SCENARIOS))
        if not (args.topic or args.all_topics) or (args.topic and args.all_topics):
            raise CommandError("One of the reset scopes should be defined: --all-topics, --topic.")
    elif args.topic or args.all_topics or args.dry_run or args.execute or any(
            getattr(args, n) not in (None, False) for n in reset.SCENARIOS):
        raise CommandError("Options --topic, --all-topics, --dry-run, --execute and the reset scenarios may only "
                           "be used with --reset-offsets")
    if (args.describe or args.delete or args.reset_offsets) and not (args.group or args.all_groups):
        action = "--describe" if args.describe else "--delete" if args.delete else "--reset-offsets"
        raise CommandError(f"Option {action} takes one of these options: --all-groups, --group")
    if args.describe:
        if sum([args.members, args.offsets, args.state is not None]) > 1:
            raise CommandError("Option --describe takes at most one of these options: --members, --offsets, --state")
        if args.state:
            raise CommandError("Option --describe does not take a value for --state")


def parse_states(value: str) -> list[str]:
    by_lower = {s.lower(): s for s in SHARE_GROUP_STATES}
    names = [s.strip() for s in value.split(",") if s.strip()]
    if any(s.lower() not in by_lower for s in names):
        raise CommandError(f"Invalid state list '{value}'. Valid states are: {', '.join(SHARE_GROUP_STATES)}")
    return [by_lower[s.lower()] for s in names]


async def run(args: argparse.Namespace) -> int:
    validate(args)
    options = admin_options(args)
    if args.timeout is not None:
        options["request_timeout_ms"] = args.timeout
    async with await Admin.connect(args.bootstrap_server, **options) as admin:
        if args.list:
            states = parse_states(args.state) if args.state else []
            listed = [g for g in await admin.list_groups(states, ["share"]) if g.group_type == "share"]
            if args.state is None:
                print("\n".join(g.group_id for g in listed))
            else:
                _emit(out.list_table(listed, include_type=False, include_state=True))
            return 0
        groups = args.group or [g.group_id for g in await admin.list_groups((), ["share"]) if g.group_type == "share"]
        if args.delete:
            return _report_deletes(await admin.delete_consumer_groups(groups))
        if args.reset_offsets:
            return await reset_offsets(admin, groups, args)
        return await describe(admin, groups, args)


async def reset_offsets(admin: Admin, groups: Sequence[str], args: argparse.Namespace) -> int:
    """Kafka's `ShareGroupCommand.resetOffsets`: only a group without members (or none yet)."""
    if not (args.dry_run or args.execute):
        print(reset.NO_EXECUTE_WARNING, file=sys.stderr)
    scenario = reset.ResetScenario(args.to_earliest, args.to_latest, args.to_current, args.to_offset,
                                   args.shift_by, args.to_datetime, args.by_duration)
    plan: dict[str, dict[TopicPartition, int]] = {}
    failed = False
    for group_id in groups:
        try:
            state = (await admin.describe_share_groups([group_id]))[group_id].state
            current = await admin.list_share_group_offsets(group_id)
        except KafkaError as error:
            if error.error_name != "GROUP_ID_NOT_FOUND":
                raise
            state, current = "Dead", {}
        if state not in ("Empty", "Dead"):
            _error(f"Share group '{group_id}' is not empty.")
            failed = True
            continue
        starts = {tp: OffsetAndMetadata(o) for tp, o in current.items() if o >= 0}
        offsets = await reset.planned_offsets(admin, args, scenario, starts)
        if args.execute and offsets:
            errors = [e for e in (await admin.alter_share_group_offsets(group_id, offsets)).values() if e is not None]
            if errors:
                raise errors[0]
        plan[group_id] = offsets
    if any(plan.values()):
        _emit(out.reset_table(plan))
    return 1 if failed else 0


async def describe(admin: Admin, groups: Sequence[str], args: argparse.Namespace) -> int:
    failed = False
    for group_id in groups:
        try:
            description = (await admin.describe_share_groups([group_id]))[group_id]
        except KafkaError as error:
            _error(f"Share group '{group_id}' does not exist." if error.error_name == "GROUP_ID_NOT_FOUND"
                   else out.kafka_message(error))
            failed = True
            continue
        if description.state == "Empty":
            print(f"\nShare group '{group_id}' has no active members.", file=sys.stderr)
        if args.members:
            if description.members:
                _emit(out.members_table(description, verbose=args.verbose))
        elif args.state is not None:
            _emit(state_table(description, verbose=args.verbose))
        else:
            _emit(await offsets_table(admin, group_id))
    return 1 if failed else 0


async def offsets_table(admin: Admin, group_id: str) -> list[str]:
    """GROUP TOPIC PARTITION START-OFFSET LAG: each partition's share-partition start offset and
    the log end offset's distance from it (`-` where either is unknown)."""
    starts = await admin.list_share_group_offsets(group_id)
    ends = await log_offsets(admin, starts, LATEST_TIMESTAMP)
    rows = [(tp, start, ends.get(tp)) for tp, start in sorted(starts.items())]
    widths = [max([15, len(group_id)]), max([15, *(len(tp.topic) for tp, _, _ in rows)]), 10, 15]
    lines = ["", out.line(widths, ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"])]
    for tp, start, end in rows:
        lag = "-" if start < 0 or end is None else str(max(0, end - start))
        lines.append(out.line(widths, [group_id, tp.topic, str(tp.partition), "-" if start < 0 else str(start), lag]))
    return lines


def state_table(description: ConsumerGroupDescription, *, verbose: bool = False) -> list[str]:
    """GROUP COORDINATOR (ID) STATE [GROUP-EPOCH ASSIGNMENT-EPOCH] #MEMBERS (Kafka's `printStates`)."""
    d, node = description, description.coordinator
    coordinator = f"{node.host}:{node.port}  ({node.node_id})"
    widths = [max(15, len(d.group_id)), max(25, len(coordinator)), 20]
    header, row = ["GROUP", "COORDINATOR (ID)", "STATE"], [d.group_id, coordinator, d.state]
    if verbose:
        widths += [15, 20]
        header += ["GROUP-EPOCH", "ASSIGNMENT-EPOCH"]
        row += [str(d.group_epoch), str(d.target_assignment_epoch)]
    widths.append(10)
    header.append("#MEMBERS")
    row.append(str(len(d.members)))
    return ["", out.line(widths, header), out.line(widths, row)]


def _report_deletes(results: dict[str, KafkaError | None]) -> int:
    deleted = [g for g, e in results.items() if e is None]
    if deleted:
        print("Deletion of requested share groups (" + ", ".join(f"'{g}'" for g in deleted) + ") was successful.")
    for group_id, error in results.items():
        if error is not None:
            _error(f"Deletion of share group '{group_id}' failed due to {out.kafka_message(error)}")
    return 1 if any(e is not None for e in results.values()) else 0


def _emit(lines: Sequence[str]) -> None:
    print("\n".join(lines))


def _error(message: str) -> None:
    print(f"Error: {message}", file=sys.stderr)
