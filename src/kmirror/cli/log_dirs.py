"""`kmirror log-dirs --describe`: kafka-log-dirs.sh. DescribeLogDirs on each broker (all, or
`--broker-list`), every partition (or those of `--topic-list`) with its size in bytes, in
Kafka's JSON: `{"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"t-0","size":N,
"offsetLag":0,"isFuture":false}],"error":null,"logDir":"/data"}]}],"version":1}`. A replica
moving to another log dir (AlterReplicaLogDirs) is listed there too, with `"isFuture":true` and
its offset lag.
"""

from __future__ import annotations

import argparse
import json

from kio.schema.errors import ErrorCode

from kmirror.cli.command_config import add_admin_arguments, admin_options
from kmirror.cli.errors import CommandError
from kmirror.client.admin import Admin
from kmirror.client.reassignments import LogDirReplica
from kmirror.types import TopicPartition


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("log-dirs", help="describe the brokers' log directories (kafka-log-dirs.sh)")
    add_admin_arguments(p)
    p.add_argument("--describe", action="store_true", required=True, help="describe the log directories")
    p.add_argument("--broker-list", help="comma separated broker ids (default: every broker)")
    p.add_argument("--topic-list", help="comma separated topics (default: every topic)")
    p.set_defaults(func=run)


def _ids(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise CommandError(f"--broker-list expects comma separated broker ids, got '{text}'") from None


async def run(args: argparse.Namespace) -> int:
    topics = {t.strip() for t in args.topic_list.split(",") if t.strip()} if args.topic_list else None
    async with await Admin.connect(args.bootstrap_server, **admin_options(args)) as admin:
        live = (await admin.describe_cluster()).broker_ids()
        brokers = _ids(args.broker_list) if args.broker_list else sorted(live)
        missing = sorted(set(brokers) - set(live))
        if missing:
            raise CommandError(f"The given brokers do not exist from --broker-list: "
                               f"{','.join(map(str, missing))}. Current existent brokers: "
                               f"{','.join(map(str, sorted(live)))}")
        print("Querying brokers for log directories information")
        described = {broker: await admin.describe_log_dirs(broker) for broker in brokers}
    print(f"Received log directory information from brokers {','.join(map(str, brokers))}")
    print(json.dumps({"brokers": [
        {"broker": broker, "logDirs": [_log_dir(log_dir, partitions, topics) for log_dir, partitions in sorted(dirs.items())]}
        for broker, dirs in described.items()], "version": 1}, separators=(",", ":")))
    return 0


def _log_dir(log_dir: str, partitions: dict[TopicPartition, LogDirReplica] | ErrorCode,
             topics: set[str] | None) -> dict[str, object]:
    """One log dir as Kafka's tool prints it; a failed one (KIP-858) with its error's exception."""
    if isinstance(partitions, ErrorCode):
        return {"partitions": [], "error": f"org.apache.kafka.common.errors.{_EXCEPTIONS.get(partitions, partitions.name)}",
                "logDir": log_dir}
    return {"partitions": [{"partition": f"{tp.topic}-{tp.partition}", "size": r.size, "offsetLag": r.offset_lag,
                            "isFuture": r.is_future}
                           for tp, r in sorted(partitions.items()) if topics is None or tp.topic in topics],
            "error": None, "logDir": log_dir}


_EXCEPTIONS = {ErrorCode.kafka_storage_error: "KafkaStorageException"}
