"""`kmirror topics`: kafka-topics.sh (create, list, describe, alter partitions, delete)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass

from kmirror.cli.command_config import add_admin_arguments, admin_options
from kmirror.cli.common import kafka_uuid, parse_key_values
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
from kmirror.client.metadata import PartitionMetadata
from kmirror.client.reassignments import PartitionReassignment


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("topics", help="create, list, describe, alter and delete topics (kafka-topics.sh)")
    add_admin_arguments(p)
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("create", "list", "describe", "alter", "delete"):
        action.add_argument(f"--{name}", action="store_true")
    p.add_argument("--topic")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="topic config override (repeatable)")
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--if-exists", action="store_true")
    p.add_argument("--under-replicated-partitions", action="store_true",
                   help="only partitions whose ISR is smaller than the replica set")
    p.add_argument("--unavailable-partitions", action="store_true",
                   help="only partitions without a leader or whose leader is not live")
    p.add_argument("--under-min-isr-partitions", action="store_true",
                   help="only partitions whose ISR is smaller than min.insync.replicas")
    p.add_argument("--at-min-isr-partitions", action="store_true",
                   help="only partitions whose ISR is exactly min.insync.replicas")
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
    async with await Admin.connect(args.bootstrap_server, **admin_options(args)) as admin:
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
    report = PartitionReport.from_args(args)
    reassigning = await admin.list_partition_reassignments()
    for name, desc in descriptions.items():
        if args.exclude_internal and desc.is_internal:
            continue
        entries = await admin.describe_configs(ConfigResourceType.TOPIC, name)
        lines = format_description(desc, non_default_configs(entries), live, report=report,
                                   min_isr=min_insync_replicas(entries),
                                   reassignments={tp.partition: r for tp, r in reassigning.items() if tp.topic == name})
        if lines:
            print("\n".join(lines))
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


def min_insync_replicas(entries: list[ConfigEntry]) -> int | None:
    """The topic's effective `min.insync.replicas` (any source), None when not described."""
    for e in entries:
        if e.name == "min.insync.replicas" and e.value is not None:
            return int(e.value)
    return None


@dataclass(frozen=True)
class PartitionReport:
    """kafka-topics.sh --describe filters. With none set, every partition is printed after the
    topic line; with some set, only partitions matching at least one, without the topic line
    (Kafka's TopicCommand `shouldPrintTopicPartition`)."""

    under_replicated: bool = False
    unavailable: bool = False
    under_min_isr: bool = False
    at_min_isr: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PartitionReport:
        return cls(
            under_replicated=bool(getattr(args, "under_replicated_partitions", False)),
            unavailable=bool(getattr(args, "unavailable_partitions", False)),
            under_min_isr=bool(getattr(args, "under_min_isr_partitions", False)),
            at_min_isr=bool(getattr(args, "at_min_isr_partitions", False)),
        )

    @property
    def filtering(self) -> bool:
        return self.under_replicated or self.unavailable or self.under_min_isr or self.at_min_isr

    def selects(self, p: PartitionMetadata, live_brokers: set[int], min_isr: int | None,
                replication_factor: int | None = None) -> bool:
        if not self.filtering:
            return True
        has_leader = p.leader >= 0
        # Kafka's PartitionDescription predicates
        under_replicated = len(p.isr) < (len(p.replicas) if replication_factor is None else replication_factor)
        unavailable = not has_leader or p.leader not in live_brokers
        under_min_isr = not has_leader or (min_isr is not None and len(p.isr) < min_isr)
        at_min_isr = min_isr is not None and len(p.isr) == min_isr
        return (
            (self.under_replicated and under_replicated)
            or (self.unavailable and unavailable)
            or (self.under_min_isr and under_min_isr)
            or (self.at_min_isr and at_min_isr)
        )


def format_description(
    desc: TopicDescription,
    configs: Mapping[str, str],
    live_brokers: set[int],
    under_replicated_only: bool = False,
    unavailable_only: bool = False,
    *,
    report: PartitionReport | None = None,
    min_isr: int | None = None,
    reassignments: Mapping[int, PartitionReassignment] | None = None,
) -> list[str]:
    """kafka-topics.sh --describe lines for one topic (header line only when not filtering).

    `Offline:` lists the replicas on brokers that are not live (or reported offline by the
    broker), shown only when there are some. A partition being reassigned shows its `Adding
    Replicas:` and `Removing Replicas:`, and the replication factor (of the first partition, and
    for `--under-replicated-partitions`) leaves the removing replicas out, as Kafka's TopicCommand."""
    moving = reassignments or {}
    if report is None:
        report = PartitionReport(under_replicated=under_replicated_only, unavailable=unavailable_only)
    lines: list[str] = []
    if not report.filtering:
        replication_factor = _replication_factor(desc.partitions[0], moving) if desc.partitions else 0
        config_text = ",".join(f"{k}={v}" for k, v in sorted(configs.items()))
        lines.append(
            f"Topic: {desc.name}\tTopicId: {kafka_uuid(desc.topic_id)}\tPartitionCount: {len(desc.partitions)}"
            f"\tReplicationFactor: {replication_factor}\tConfigs: {config_text}"
        )
    for p in desc.partitions:
        if not report.selects(p, live_brokers, min_isr, _replication_factor(p, moving)):
            continue
        leader = "none" if p.leader < 0 else str(p.leader)
        offline = tuple(r for r in p.replicas if r not in live_brokers or r in p.offline_replicas)
        r = moving.get(p.partition)
        lines.append(
            f"\tTopic: {desc.name}\tPartition: {p.partition}\tLeader: {leader}"
            f"\tReplicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}"
            + (f"\tAdding Replicas: {_ids(r.adding_replicas)}\tRemoving Replicas: {_ids(r.removing_replicas)}"
               if r is not None else "")
            + (f"\tOffline: {_ids(offline)}" if offline else "")
        )
    return lines


def _replication_factor(p: PartitionMetadata, moving: Mapping[int, PartitionReassignment]) -> int:
    r = moving.get(p.partition)
    return len(p.replicas) - (len(r.removing_replicas) if r is not None else 0)


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(str(i) for i in ids)
