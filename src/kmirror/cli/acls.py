"""`kmirror acls`: kafka-acls.sh (Apache Kafka 4's `AclCommand`) over the Admin API.

`--add` creates the bindings the options expand to (kmirror.cli.acl_bindings), after
describing each resource's bindings so that one already present is reported as
`Acl ... already exists.` rather than created; `--remove` deletes by filter (every entry of the
resource when no principal is given); `--list` describes the bindings of the named resources,
or of the whole cluster, optionally only those of `--principal`s.

`--remove` asks `... ? (y/n)` per resource unless `--force`, reading the answer from standard
input as kafka-acls.sh reads its console, so a script can pipe `y`; an answer other than y
skips that resource (exit 0, as Kafka), and standard input at its end (no answer at all) is an
error rather than a silent no. Every question is asked before the cluster is contacted.
"""

from __future__ import annotations

import argparse
import sys

from kmirror.cli.acl_bindings import (
    ACL_OPERATIONS,
    PATTERN_TYPES,
    AccessControlEntry,
    AclOptions,
    ResourcePatternFilter,
    binding_str,
    entry_of,
    format_adding,
    format_current,
    format_remove_question,
    group_by_resource,
    parse_pattern_type,
    parse_principal,
    pascal_name,
    resource_filter_to_acls,
    resource_filters,
    resource_to_acls,
)
from kmirror.cli.command_config import add_admin_arguments, admin_options
from kmirror.cli.errors import CommandError
from kmirror.client.acls import AclBinding, AclBindingFilter
from kmirror.client.admin import Admin

ACTIONS = ("add", "remove", "list")

# Options each option excludes (Kafka's AclCommandOptions.checkArgs, checkInvalidArgs).
_INVALID_WITH = {
    "list": ("producer", "consumer", "allow_host", "allow_principal", "deny_host", "deny_principal"),
    "producer": ("operation", "deny_principal", "deny_host"),
    "consumer": ("operation", "deny_principal", "deny_host"),
}


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("acls", help="add, remove and list ACLs (kafka-acls.sh)",
                              description="This tool helps to manage acls on kafka.")
    add_admin_arguments(p)
    p.add_argument("--add", action="store_true", help="indicates you are trying to add ACLs")
    p.add_argument("--remove", action="store_true", help="indicates you are trying to remove ACLs")
    p.add_argument("--list", action="store_true", help="list ACLs for the specified resource(s), or all of them")
    p.add_argument("--topic", action="append", default=[], help="topic (repeatable; '*' is every topic)")
    p.add_argument("--group", action="append", default=[], help="consumer group (repeatable; '*' is every group)")
    p.add_argument("--cluster", action="store_true", help="the cluster resource (kafka-cluster)")
    p.add_argument("--transactional-id", action="append", default=[], help="transactional id (repeatable)")
    p.add_argument("--delegation-token", action="append", default=[], help="delegation token id (repeatable)")
    p.add_argument("--cluster-mirror", action="append", default=[],
                   help="cluster mirror (KIP-1279; repeatable; '*' is every mirror)")
    p.add_argument("--user-principal", action="append", default=[],
                   help="a user principal as the resource (for CreateTokens, DescribeTokens)")
    p.add_argument("--resource-pattern-type", default="literal", metavar="|".join(PATTERN_TYPES),
                   help="literal or prefixed when adding; also any or match when listing or removing "
                        "(default literal)")
    p.add_argument("--operation", action="append", default=[],
                   help="operation allowed or denied (repeatable, default All): "
                        + ", ".join(pascal_name(op) for op in ACL_OPERATIONS))
    p.add_argument("--allow-principal", action="append", default=[], metavar="TYPE:NAME",
                   help="principal allowed, e.g. User:alice, User:* (repeatable)")
    p.add_argument("--deny-principal", action="append", default=[], metavar="TYPE:NAME",
                   help="principal denied (repeatable); deny rules take precedence over allow rules")
    p.add_argument("--principal", action="append", default=[], metavar="TYPE:NAME",
                   help="with --list: only the ACLs of this principal (repeatable)")
    p.add_argument("--allow-host", action="append", default=[], help="host of --allow-principal (default *)")
    p.add_argument("--deny-host", action="append", default=[], help="host of --deny-principal (default *)")
    p.add_argument("--producer", action="store_true",
                   help="ACLs of a producer: Write, Describe, Create on topics (Write, Describe on transactional ids)")
    p.add_argument("--consumer", action="store_true",
                   help="ACLs of a consumer: Read, Describe on topics and Read on groups")
    p.add_argument("--idempotent", action="store_true", help="with --producer: IdempotentWrite on the cluster")
    p.add_argument("--force", action="store_true", help="assume yes to all queries and do not prompt")
    p.set_defaults(func=run)


def _given(args: argparse.Namespace, dest: str) -> bool:
    return bool(getattr(args, dest))


def validate(args: argparse.Namespace) -> str:
    """The action, after kafka-acls.sh's argument checks (their messages)."""
    actions = [a for a in ACTIONS if _given(args, a)]
    if len(actions) != 1:
        raise CommandError("Command must include exactly one action: --list, --add, --remove.")
    for used, invalid in _INVALID_WITH.items():
        if _given(args, used):
            for other in invalid:
                if _given(args, other):
                    raise CommandError(f'Option "--{used}" can\'t be used with option "--{other.replace("_", "-")}"')
    if args.principal and not args.list:
        raise CommandError("The --principal option is only available if --list is set")
    if args.producer and not args.topic:
        raise CommandError("With --producer you must specify a --topic")
    if args.idempotent and not args.producer:
        raise CommandError("The --idempotent option is only available if --producer is set")
    if args.consumer and (not args.topic or not args.group
                          or (not args.producer and (args.cluster or args.transactional_id))):
        raise CommandError("With --consumer you must specify a --topic and a --group and no --cluster or "
                           "--transactional-id option should be specified.")
    return actions[0]


def acl_options(args: argparse.Namespace) -> AclOptions:
    return AclOptions(
        topics=tuple(args.topic), groups=tuple(args.group), transactional_ids=tuple(args.transactional_id),
        delegation_tokens=tuple(args.delegation_token), user_principals=tuple(args.user_principal),
        cluster_mirrors=tuple(args.cluster_mirror),
        cluster=args.cluster, pattern_type=parse_pattern_type(args.resource_pattern_type),
        operations=tuple(args.operation), allow_principals=tuple(args.allow_principal),
        deny_principals=tuple(args.deny_principal), allow_hosts=tuple(args.allow_host),
        deny_hosts=tuple(args.deny_host), producer=args.producer, consumer=args.consumer,
        idempotent=args.idempotent)


def confirm(question: str) -> bool:
    print(question, flush=True)
    answer = sys.stdin.readline()
    if not answer:
        raise CommandError("no answer on standard input to confirm the removal; use --force to remove without asking")
    return answer.strip().lower() == "y"


def removal_filters(acls: dict[ResourcePatternFilter, set[AccessControlEntry]], force: bool) -> list[AclBindingFilter]:
    """The DeleteAcls filters of the resources confirmed (all with `force`), in resource order."""
    out: list[AclBindingFilter] = []
    for resource in sorted(acls, key=ResourcePatternFilter.sort_key):
        entries = acls[resource]
        if not force and not confirm(format_remove_question(resource, entries)):
            continue
        if not entries:
            out.append(resource.binding_filter())
        else:
            out.extend(resource.binding_filter(e) for e in sorted(entries, key=AccessControlEntry.sort_key))
    return out


async def add_acls(admin: Admin, acls: dict[ResourcePatternFilter, set[AccessControlEntry]]) -> None:
    for resource in sorted(acls, key=ResourcePatternFilter.sort_key):
        existing = {entry_of(b) for b in await admin.describe_acls(resource.binding_filter())}
        new: list[AccessControlEntry] = []
        for entry in sorted(acls[resource], key=AccessControlEntry.sort_key):
            if entry in existing:
                print(f"Acl {binding_str(resource, entry)} already exists.")
            else:
                new.append(entry)
        if new:
            print(format_adding(resource, new), end="", flush=True)
            errors = [e for e in (await admin.create_acls(resource.binding(e) for e in new)).values() if e]
            if errors:
                raise errors[0]


async def list_acls(admin: Admin, filters: list[ResourcePatternFilter], principals: list[str]) -> None:
    bindings: list[AclBinding] = []
    if not filters:
        bindings = await admin.describe_acls()
    for f in filters:
        bindings += await admin.describe_acls(f.binding_filter())
    acls = group_by_resource(bindings)
    if not principals:
        print(format_current(acls), end="")
    for principal in principals:
        print(f"ACLs for principal `{principal}`")
        print(format_current({r: {e for e in entries if e.principal == principal} for r, entries in acls.items()
                              if any(e.principal == principal for e in entries)}), end="")


async def run(args: argparse.Namespace) -> int:
    action = validate(args)
    options = acl_options(args)
    # Every input check and question comes before the cluster is contacted.
    if action == "add":
        to_add = resource_to_acls(options)
    elif action == "remove":
        to_remove = removal_filters(resource_filter_to_acls(options), args.force)
        if not to_remove:
            return 0
    else:
        filters = resource_filters(options, required=False)
        principals = list(dict.fromkeys(parse_principal(p) for p in args.principal))
    async with await Admin.connect(args.bootstrap_server, **admin_options(args)) as admin:
        if action == "add":
            await add_acls(admin, to_add)
        elif action == "remove":
            await admin.delete_acls_matching(to_remove)
        else:
            await list_acls(admin, filters, principals)
    return 0
