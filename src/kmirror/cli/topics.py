"""`kmirror topics`: kafka-topics.sh (create, list, describe, alter partitions, delete)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from kmirror.cli.common import add_bootstrap_argument, kafka_uuid, parse_key_values
from kmirror.cli.errors import CommandError
from kmirror.client.admin import (
    Admin,
    ConfigEntry,
    ConfigResourceType,
    ConfigSource,
    NewTopic,
    TopicDescription,
)
from kmirror.client.errors import KafkaError


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("topics", help="create, list, describe, alter and delete topics (kafka-topics.sh)")
    add_bootstrap_argument(p)
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("create", "list", "describe", "alter", "delete"):
        action.add_argument(f"--{name}", action="store_true")
    p.add_argument("--topic")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="topic config override (repeatable)")
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--if-exists", action="store_true")
    p.add_argument("--under-replicated-partitions", action="store_true")
    p.add_argument("--unavailable-partitions", action="store_true")
    p.add_argument("--exclude-internal", action="store_true")
    p.set_defaults(func=run)


def validate(args: argparse.Namespace) -> None:
    if (args.create or args.alter or args.delete) and not args.topic:
        raise CommandError("--topic is required with --create, --alter and --delete")
    if args.alter and args.partitions is None:
        raise CommandError("--alter needs --partitions")
    if args.partitions is not None and args.partitions < 1:
        raise CommandError("the number of partitions must be at least 1")
    if args.replication_factor is not None and args.replication_factor < 1:
        raise CommandError("the replication factor must be at least 1")


async def run(args: argparse.Namespace) -> int:
    validate(args)
    configs = parse_key_values(args.config, "--config")
    async with await Admin.connect(args.bootstrap_server, request_timeout_ms=args.command_timeout_ms) as admin:
        if args.create:
            return await _create(admin, args, configs)
        if args.list:
            for name in await admin.list_topics(include_internal=not args.exclude_internal):
                print(name)
            return 0
        if args.describe:
            return await _describe(admin, args)
        if args.alter:
            await admin.create_partitions({args.topic: args.partitions})
            return 0
        try:
            await admin.delete_topics([args.topic])
        except KafkaError as exc:
            if not (args.if_exists and exc.error_name == "UNKNOWN_TOPIC_OR_PARTITION"):
                raise
        return 0


async def _create(admin: Admin, args: argparse.Namespace, configs: dict[str, str]) -> int:
    topic = NewTopic(args.topic, args.partitions or -1, args.replication_factor or -1, configs)
    try:
        await admin.create_topics([topic])
    except KafkaError as exc:
        if args.if_not_exists and exc.error_name == "TOPIC_ALREADY_EXISTS":
            return 0
        raise
    print(f"Created topic {args.topic}.")
    return 0


async def _describe(admin: Admin, args: argparse.Namespace) -> int:
    descriptions = await admin.describe_topics([args.topic] if args.topic else None)
    live = set((await admin.describe_cluster()).broker_ids())
    for name, desc in descriptions.items():
        if args.exclude_internal and desc.is_internal:
            continue
        filtering = args.under_replicated_partitions or args.unavailable_partitions
        configs = {} if filtering else await _dynamic_configs(admin, name)
        print("\n".join(format_description(desc, configs, live, args.under_replicated_partitions,
                                           args.unavailable_partitions)))
    return 0


async def _dynamic_configs(admin: Admin, topic: str) -> dict[str, str]:
    entries = await admin.describe_configs(ConfigResourceType.TOPIC, topic)
    return non_default_configs(entries)


def non_default_configs(entries: list[ConfigEntry]) -> dict[str, str]:
    """What kafka-topics.sh shows after `Configs:`: the topic's own overrides."""
    return {
        e.name: ("<sensitive>" if e.is_sensitive else e.value or "")
        for e in entries
        if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    }


def format_description(
    desc: TopicDescription,
    configs: Mapping[str, str],
    live_brokers: set[int],
    under_replicated_only: bool = False,
    unavailable_only: bool = False,
) -> list[str]:
    """kafka-topics.sh --describe lines for one topic (header line only when not filtering)."""
    lines: list[str] = []
    filtering = under_replicated_only or unavailable_only
    if not filtering:
        replication_factor = len(desc.partitions[0].replicas) if desc.partitions else 0
        config_text = ",".join(f"{k}={v}" for k, v in sorted(configs.items()))
        lines.append(
            f"Topic: {desc.name}\tTopicId: {kafka_uuid(desc.topic_id)}\tPartitionCount: {len(desc.partitions)}"
            f"\tReplicationFactor: {replication_factor}\tConfigs: {config_text}"
        )
    for p in desc.partitions:
        unavailable = p.leader < 0 or p.leader not in live_brokers
        under_replicated = len(p.isr) < len(p.replicas)
        if under_replicated_only and not under_replicated:
            continue
        if unavailable_only and not unavailable:
            continue
        leader = "none" if p.leader < 0 else str(p.leader)
        lines.append(
            f"\tTopic: {desc.name}\tPartition: {p.partition}\tLeader: {leader}"
            f"\tReplicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}"
            + (f"\tOffline: {_ids(p.offline_replicas)}" if p.offline_replicas else "")
        )
    return lines


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(str(i) for i in ids)
