"""`kmirror configs`: kafka-configs.sh for topics, brokers, a broker's loggers
(`broker-loggers`, KIP-412: levels changed while it runs), groups (KIP-848 group configs),
cluster mirrors and users' SCRAM credentials (describe, alter); client quotas (`--entity-type users|clients|ips`) are
`kmirror.cli.client_quotas`.

`--entity-type mirrors` is KIP-1279's MIRROR config resource (type 64): a mirror's
bootstrap.servers, security.* / sasl.* / ssl.*, mirror.topic.properties.exclude,
mirror.groups.include, mirror.acl.include. `--describe` lists the configs the mirror was
created or altered with (the KIP defines no ConfigSource for mirrors: the broker reports
UNKNOWN), `--all` adds the KIP defaults (DEFAULT_CONFIG).
"""

from __future__ import annotations

import argparse

from kmirror.cli import client_quotas
from kmirror.cli.command_config import add_admin_arguments, admin_options
from kmirror.cli.common import parse_key_values
from kmirror.cli.errors import CommandError
from kmirror.cli.user_scram import run_users
from kmirror.client.admin import Admin, AlterConfigOp, ConfigEntry, ConfigResourceType, ConfigSource

ENTITY_TYPES = {"topics": ConfigResourceType.TOPIC, "brokers": ConfigResourceType.BROKER,
                "broker-loggers": ConfigResourceType.BROKER_LOGGER, "groups": ConfigResourceType.GROUP,
                "mirrors": ConfigResourceType.MIRROR}
_LABEL = {ConfigResourceType.TOPIC: "topic", ConfigResourceType.BROKER: "broker",
          ConfigResourceType.BROKER_LOGGER: "broker-logger", ConfigResourceType.GROUP: "group",
          ConfigResourceType.MIRROR: "mirror"}


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("configs", help="describe and alter topic, broker, broker logger, group and mirror configs "
                                              "(kafka-configs.sh)")
    add_admin_arguments(p)
    p.add_argument("--entity-type", choices=sorted([*ENTITY_TYPES, *client_quotas.QUOTA_ENTITY_TYPES]))
    p.add_argument("--entity-name")
    p.add_argument("--entity-default", action="store_true", help="the cluster-wide broker default")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true")
    action.add_argument("--alter", action="store_true")
    p.add_argument("--all", action="store_true", help="with --describe: every config, not only dynamic ones")
    p.add_argument("--add-config", action="append", metavar="K=V[,K2=V2]")
    p.add_argument("--delete-config", action="append", metavar="K[,K2]")
    client_quotas.add_arguments(p)
    p.set_defaults(func=run)


def resource(args: argparse.Namespace) -> tuple[ConfigResourceType, str]:
    resource_type = ENTITY_TYPES[args.entity_type]
    if args.entity_default:
        if resource_type != ConfigResourceType.BROKER:
            raise CommandError("--entity-default applies to --entity-type brokers only")
        return resource_type, ""
    if not args.entity_name:
        raise CommandError("--entity-name (or --entity-default for brokers) is required")
    if resource_type == ConfigResourceType.BROKER_LOGGER and not args.entity_name.isdigit():
        raise CommandError(f"The entity name for broker-loggers must be a valid integer broker id, "
                           f"found: {args.entity_name}")
    return resource_type, args.entity_name


def alter_ops(args: argparse.Namespace) -> list[tuple[str, AlterConfigOp, str | None]]:
    adds = parse_key_values(args.add_config, "--add-config")
    deletes = [k.strip() for item in args.delete_config or [] for k in item.split(",") if k.strip()]
    if not adds and not deletes:
        raise CommandError("--alter needs --add-config or --delete-config")
    both = sorted(set(adds) & set(deletes))
    if both:
        raise CommandError(f"config(s) both added and deleted: {', '.join(both)}")
    return [(k, AlterConfigOp.SET, v) for k, v in adds.items()] + [(k, AlterConfigOp.DELETE, None) for k in deletes]


async def run(args: argparse.Namespace) -> int:
    if args.entity_type == "users" and _names_scram(args):  # SCRAM credentials (kmirror.cli.user_scram)
        return await run_users(args)
    if client_quotas.is_quota_command(args):
        code = await client_quotas.run(args)
        if code == 0 and args.entity_type == "users" and not args.alter and not args.entity_default:
            code = await run_users(args)  # kafka-configs.sh describes a user's SCRAM credentials beside its quotas
        return code
    if args.entity_type is None:
        raise CommandError("--entity-type is required")
    resource_type, name = resource(args)
    ops = alter_ops(args) if args.alter else []
    async with await Admin.connect(args.bootstrap_server, **admin_options(args)) as admin:
        label = _entity_label(resource_type, name)
        if args.alter:
            await admin.incremental_alter_configs(resource_type, name, ops)
            print(f"Completed updating config for {label}.")
            return 0
        entries = await admin.describe_configs(resource_type, name)
        print("\n".join(format_describe(resource_type, name, entries, args.all)))
    return 0


def _entity_label(resource_type: ConfigResourceType, name: str) -> str:
    if resource_type == ConfigResourceType.BROKER and name == "":
        return "default brokers"
    return f"{_LABEL[resource_type]} {name}"


DYNAMIC_SOURCES = frozenset(
    {
        ConfigSource.DYNAMIC_TOPIC_CONFIG,
        ConfigSource.DYNAMIC_BROKER_CONFIG,
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
        ConfigSource.GROUP_CONFIG,
    }
)


def format_describe(
    resource_type: ConfigResourceType, name: str, entries: list[ConfigEntry], all_configs: bool
) -> list[str]:
    """kafka-configs.sh --describe: a heading, then `  k=v sensitive=false synonyms={...}`."""
    kind = "All" if all_configs else "Dynamic"
    label = "the default broker" if resource_type == ConfigResourceType.BROKER and name == "" else (
        f"{_LABEL[resource_type]} {name}")
    lines = [f"{kind} configs for {label} are:"]
    for e in sorted(entries, key=lambda e: e.name):
        if not all_configs and not _is_set(resource_type, e):
            continue
        value = "null" if e.is_sensitive or e.value is None else e.value
        synonyms = ", ".join(
            f"{_source_name(src)}:{n}={'null' if e.is_sensitive or v is None else v}" for n, v, src in e.synonyms
        )
        lines.append(f"  {e.name}={value} sensitive={str(e.is_sensitive).lower()} synonyms={{{synonyms}}}")
    return lines


def _is_set(resource_type: ConfigResourceType, entry: ConfigEntry) -> bool:
    """Shown without --all: dynamic configs; for a mirror, every config not at its default."""
    if resource_type == ConfigResourceType.MIRROR:
        return entry.source != ConfigSource.DEFAULT_CONFIG
    return entry.source in DYNAMIC_SOURCES


def _source_name(source: int) -> str:
    try:
        return ConfigSource(source).name
    except ValueError:
        return "UNKNOWN"


def _names_scram(args: argparse.Namespace) -> bool:
    """Whether --add-config/--delete-config name a SCRAM mechanism (the rest are client quotas)."""
    return any("SCRAM-SHA-" in item for items in (args.add_config, args.delete_config) for item in items or ())
