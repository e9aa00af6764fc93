"""`kmirror mirrors`: kafka-mirrors.sh (KIP-1279 "Public Interfaces" > Command-Line).

Actions: `--create --mirror M --mirror-config FILE`, `--alter --mirror M --mirror-config FILE`,
`--add --mirror M --topic REGEX [--replication-factor N]`, `--remove --topic REGEX [--mirror M]`,
`--pause` / `--resume --topic REGEX [--mirror M]`, `--delete --mirror M`, `--list`,
`--describe [--mirror M] [--topic REGEX] [--state STATE[,STATE...]]`. Always against the destination cluster
(`--bootstrap-server`); `--command-config FILE` holds client properties.

`--topic` is a topic name or a full-match regex, resolved to names by the tool because the
RPCs take names (docs/operations.md, "Mirrors"):
- `--add`: against the *source* cluster's topics (the mirror's bootstrap servers from
  ListMirrors), since a topic to mirror may not exist at the destination yet;
- `--remove` / `--pause` / `--resume`: against the destination's mirror topics
  (DescribeMirrors); a pattern keeps only topics in a state the action applies to.
A legal topic name that names an existing topic means that topic only (a '.' in it is not a
wildcard); a legal name that matches nothing is sent as is, so the broker answers with the
precise error (UNKNOWN_TOPIC_OR_PARTITION, TOPIC_NOT_IN_MIRROR).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kmirror.cli.command_config import add_admin_arguments, admin_options, read_properties
from kmirror.cli.errors import CommandError
from kmirror.client.admin import Admin, AlterConfigOp, ConfigResourceType
from kmirror.client.errors import KafkaClientError, KafkaError
from kmirror.client.mirrors import ListedMirror, MirrorPartitionDescription
from kmirror.kip1279.state import MirrorPartitionState

ACTIONS = ("create", "alter", "add", "remove", "pause", "resume", "delete", "list", "describe")
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")

# Partition states a pattern-selected topic must have (one partition suffices) for an action.
_PATTERN_STATES: dict[str, frozenset[str]] = {
    "remove": frozenset({"UNKNOWN", "PREPARING", "MIRRORING", "PAUSING", "PAUSED", "FAILED"}),
    "pause": frozenset({"UNKNOWN", "PREPARING", "MIRRORING"}),
    "resume": frozenset({"PAUSING", "PAUSED"}),
}

LIST_HEADERS = ("MIRROR", "TOPICS", "CLUSTER-ID", "BOOTSTRAP-SERVER")
DESCRIBE_HEADERS = ("MIRROR", "TOPIC", "PARTITION", "SOURCE-OFFSET", "DESTINATION-OFFSET", "LAG", "STATE")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("mirrors", help="create cluster mirrors and add topics to them (kafka-mirrors.sh)",
                              description="This tool helps to create cluster mirrors and add topics to them.")
    add_admin_arguments(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--create", action="store_true", help="create a new cluster mirror from a source cluster")
    action.add_argument("--alter", action="store_true", help="alter the configuration of an existing cluster mirror")
    action.add_argument("--add", action="store_true", help="add topic(s) to an existing cluster mirror (supports regex)")
    action.add_argument("--remove", action="store_true",
                        help="remove topic(s) from an existing cluster mirror (supports regex)")
    action.add_argument("--pause", action="store_true", help="pause mirroring for topic(s) matching the pattern")
    action.add_argument("--resume", action="store_true",
                        help="resume mirroring for previously paused topic(s) matching the pattern")
    action.add_argument("--delete", action="store_true", help="delete a cluster mirror including its configuration")
    action.add_argument("--list", action="store_true", help="list all cluster mirrors")
    action.add_argument("--describe", action="store_true",
                        help="describe a cluster mirror including partition lag and state")
    p.add_argument("--mirror", metavar="NAME", help="the name of the cluster mirror")
    p.add_argument("--mirror-config", metavar="FILE", help="property file containing source cluster configs")
    p.add_argument("--topic", metavar="TOPIC", help="topic name or regex pattern to match topics (e.g. 'test-.*')")
    p.add_argument("--state", metavar="STATE[,STATE...]",
                   help="with --describe: only partitions in these states (" + ", ".join(s.name for s in MirrorPartitionState) + ")")
    p.add_argument("--verbose", action="store_true",
                   help="with --describe: a REASON column saying why a partition is STOPPED or FAILED")
    p.add_argument("--replication-factor", type=int, metavar="N",
                   help="replication factor of mirror topics created by --add (default: the destination's)")
    p.set_defaults(func=run)


def action_of(args: argparse.Namespace) -> str:
    return next(a for a in ACTIONS if getattr(args, a))


def validate(args: argparse.Namespace) -> str:
    """The action, after checking which options it needs and allows (CommandError otherwise)."""
    action = action_of(args)
    needs = {
        "create": ("mirror", "mirror_config"), "alter": ("mirror", "mirror_config"), "add": ("mirror", "topic"),
        "remove": ("topic",), "pause": ("topic",), "resume": ("topic",), "delete": ("mirror",),
        "list": (), "describe": (),
    }[action]
    for option in needs:
        if getattr(args, option) is None:
            raise CommandError(f"--{action} requires --{option.replace('_', '-')}")
    if args.mirror_config is not None and action not in ("create", "alter"):
        raise CommandError("--mirror-config applies to --create and --alter only")
    if args.replication_factor is not None:
        if action != "add":
            raise CommandError("--replication-factor applies to --add only")
        if args.replication_factor < 1:
            raise CommandError("--replication-factor must be at least 1")
    if args.topic is not None and action in ("create", "alter", "delete", "list"):
        raise CommandError(f"--topic does not apply to --{action}")
    if args.mirror is not None and action == "list":
        raise CommandError("--mirror does not apply to --list")
    if args.topic is not None:
        compile_topic_pattern(args.topic)
    if args.state is not None:
        if action != "describe":
            raise CommandError("--state applies to --describe only")
        parse_states(args.state)
    return action


def parse_states(value: str) -> frozenset[str]:
    """`--state`'s comma-separated partition states, by the names --describe prints (any case)."""
    names = {s.name for s in MirrorPartitionState}
    wanted = frozenset(part.strip().upper() for part in value.split(",") if part.strip())
    unknown = sorted(wanted - names)
    if unknown or not wanted:
        raise CommandError(f"--state {value!r}: not a partition state (one or more of {', '.join(sorted(names))})")
    return wanted


def compile_topic_pattern(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise CommandError(f"--topic {pattern!r} is not a valid regex: {exc}") from None


def resolve_topics(pattern: str, candidates: Iterable[str]) -> list[str]:
    """The topics `pattern` selects among `candidates` (see the module docstring)."""
    names = set(candidates)
    if _LEGAL_TOPIC.fullmatch(pattern) and pattern in names:
        return [pattern]
    regex = compile_topic_pattern(pattern)
    matched = sorted(n for n in names if regex.fullmatch(n))
    if not matched and _LEGAL_TOPIC.fullmatch(pattern):
        return [pattern]
    return matched


def is_literal(pattern: str) -> bool:
    return _LEGAL_TOPIC.fullmatch(pattern) is not None


def mirror_topics(
    partitions: Iterable[MirrorPartitionDescription],
) -> dict[str, dict[str, set[str]]]:
    """mirror -> topic -> the states of its partitions."""
    out: dict[str, dict[str, set[str]]] = {}
    for d in partitions:
        out.setdefault(d.mirror_name, {}).setdefault(d.topic, set()).add(d.state)
    return out


def select_member_topics(
    action: str, pattern: str, mirror: str | None, membership: Mapping[str, Mapping[str, set[str]]]
) -> dict[str, list[str]]:
    """mirror -> topics for --remove/--pause/--resume. A literal name keeps every mirror
    holding it (or `mirror` when given, even if it does not hold it: the broker answers);
    a pattern keeps topics with a partition in a state `action` applies to."""
    mirrors = [mirror] if mirror is not None else sorted(membership)
    out: dict[str, list[str]] = {}
    for name in mirrors:
        topics = membership.get(name, {})
        if is_literal(pattern) and (pattern in topics or mirror is not None):
            out[name] = [pattern]
            continue
        if is_literal(pattern):
            continue
        regex = compile_topic_pattern(pattern)
        wanted = _PATTERN_STATES[action]
        chosen = sorted(t for t, states in topics.items() if regex.fullmatch(t) and (not states or states & wanted))
        if chosen:
            out[name] = chosen
    return out


def format_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """Left-aligned columns, each as wide as its widest cell, one space apart (the last column
    unpadded), as kafka-consumer-groups.sh prints."""
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return [" ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=False)) + " " + r[-1] for r in cells]


def _known(value: int) -> object:
    return "-" if value < 0 else value


def format_list(mirrors: Iterable[ListedMirror]) -> list[str]:
    return format_table(LIST_HEADERS, [(m.name, m.topic_count, m.source_cluster_id or "-", m.source_bootstrap)
                                       for m in mirrors])


def format_describe(partitions: Iterable[MirrorPartitionDescription], verbose: bool = False) -> list[str]:
    """`--verbose` adds a last REASON column: why a partition is STOPPED or FAILED, e.g. its
    source topic was deleted or re-created, or what a PREPARING or STOPPING one waits for,
    e.g. replicas still truncating ("-" when none is known)."""
    rows = [(d.mirror_name, d.topic, d.partition, _known(d.source_offset), _known(d.destination_offset),
             _known(d.lag), d.state, *((d.reason or "-",) if verbose else ()))
            for d in partitions]
    return format_table(DESCRIBE_HEADERS + (("REASON",) if verbose else ()), rows)


_DONE = {
    "add": "Added {n} topic(s) to mirror {m}: [{t}]",
    "remove": "Removed {n} topic(s) from mirror {m}: [{t}]",
    "pause": "Paused mirroring for {n} topic(s) in mirror {m}: [{t}]",
    "resume": "Resumed mirroring for {n} topic(s) in mirror {m}: [{t}]",
}


def report_topic_results(action: str, mirror: str, results: Mapping[str, KafkaError | None]) -> int:
    """Prints the KIP's success line and one stderr line per failed topic; the exit code."""
    ok = sorted(t for t, e in results.items() if e is None)
    failed = sorted((t, e) for t, e in results.items() if e is not None)
    if ok:
        print(_DONE[action].format(n=len(ok), m=mirror, t=", ".join(ok)))
    for topic, error in failed:
        print(f"Error: {action} of topic {topic} in mirror {mirror} failed: {error.error_name}"
              + (f": {error.error_message}" if error.error_message else ""), file=sys.stderr)
    return 1 if failed else 0


async def run(args: argparse.Namespace) -> int:
    action = validate(args)
    options = admin_options(args)
    mirror_config = read_properties(args.mirror_config, "--mirror-config") if args.mirror_config else {}
    async with await Admin.connect(args.bootstrap_server, **options) as admin:
        if action == "create":
            await admin.create_mirror(args.mirror, mirror_config)
            print(f"Created mirror {args.mirror}")
        elif action == "alter":
            await admin.incremental_alter_configs(
                ConfigResourceType.MIRROR, args.mirror, [(k, AlterConfigOp.SET, v) for k, v in mirror_config.items()])
            print(f"Completed updating config for mirror {args.mirror}.")
        elif action == "delete":
            await admin.delete_mirror(args.mirror)
            print(f"Deleted mirror {args.mirror}")
        elif action == "list":
            print("\n".join(format_list(await admin.list_mirrors())))
        elif action == "describe":
            names = [args.mirror] if args.mirror else None
            described = await admin.describe_mirrors(names, args.topic)
            if args.state is not None:
                states = parse_states(args.state)
                described = [d for d in described if d.state in states]
            print("\n".join(format_describe(described, args.verbose)))
        elif action == "add":
            topics = await source_topics_for(admin, args.mirror, args.topic, options)
            results = await admin.add_topics_to_mirror(args.mirror, topics, args.replication_factor)
            return report_topic_results(action, args.mirror, results)
        else:
            return await member_topics_action(admin, action, args.mirror, args.topic)
    return 0


async def source_topics_for(admin: Admin, mirror: str, pattern: str, options: Mapping[str, Any]) -> list[str]:
    listed = {m.name: m for m in await admin.list_mirrors()}
    source = listed.get(mirror)
    if source is None:
        raise CommandError(f"mirror {mirror} does not exist (UNKNOWN_MIRROR)")
    try:
        async with await Admin.connect(source.source_bootstrap, **options) as source_admin:
            candidates = await source_admin.list_topics()
    except KafkaClientError as exc:
        if is_literal(pattern):
            return [pattern]  # the broker resolves the name against the source itself
        raise CommandError(f"cannot resolve --topic {pattern!r} against the source cluster "
                           f"{source.source_bootstrap}: {exc}") from None
    topics = resolve_topics(pattern, candidates)
    if not topics:
        raise CommandError(f"no topic of the source cluster {source.source_bootstrap} matches '{pattern}'")
    return topics


async def member_topics_action(admin: Admin, action: str, mirror: str | None, pattern: str) -> int:
    membership = mirror_topics(await admin.describe_mirrors([mirror] if mirror else None))
    selected = select_member_topics(action, pattern, mirror, membership)
    if not selected:
        where = f"mirror {mirror}" if mirror else "any mirror"
        raise CommandError(f"no topic of {where} matches '{pattern}' in a state --{action} applies to")
    method = getattr(admin, {"remove": "remove_topics_from_mirror", "pause": "pause_mirror_topics",
                             "resume": "resume_mirror_topics"}[action])
    code = 0
    for name, topics in selected.items():
        code |= report_topic_results(action, name, await method(name, topics))
    return code
