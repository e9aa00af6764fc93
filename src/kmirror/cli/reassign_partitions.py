"""`kmirror reassign-partitions`: kafka-reassign-partitions.sh.

- `--generate --topics-to-move-json-file F --broker-list 1,2,3`: prints the current assignment
  and a proposed one over those brokers (`{"topics": [{"topic": "t"}], "version": 1}` in).
- `--execute --reassignment-json-file F [--throttle B/s] [--additional]`: prints the current
  assignment (to roll back with), starts the reassignments; with `--throttle` it first sets
  `leader.replication.throttled.replicas` (the current replicas) and
  `follower.replication.throttled.replicas` (the moving ones) on the topics, and
  `leader/follower.replication.throttled.rate` on every broker involved.
  `--replica-alter-log-dirs-throttle B/s` sets `replica.alter.log.dirs.io.max.bytes.per.second`
  on the brokers whose replicas move between log dirs.
- `--verify --reassignment-json-file F [--preserve-throttles]`: the status of each partition;
  once every one is complete, removes the throttle configs.
- `--cancel --reassignment-json-file F [--preserve-throttles]`, `--list`.
The reassignment JSON is Kafka's: `{"version": 1, "partitions": [{"topic": "t", "partition": 0,
"replicas": [1, 2], "log_dirs": ["any", "any"]}]}`; a log dir other than "any" moves that replica
to that log dir of its broker (AlterReplicaLogDirs, sent to the broker) and `--verify` follows it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
from collections.abc import Mapping, Sequence

from kio.schema.errors import ErrorCode

from kmirror.cli.command_config import add_admin_arguments, admin_options
from kmirror.cli.errors import CommandError
from kmirror.client.admin import Admin, AlterConfigOp, ConfigResourceType
from kmirror.client.reassignments import PartitionReassignment
from kmirror.metadata.controller.placement import place_replicas
from kmirror.metadata.controller.result import ApiError
from kmirror.types import TopicPartition

LEADER_RATE, FOLLOWER_RATE = "leader.replication.throttled.rate", "follower.replication.throttled.rate"
LEADER_REPLICAS, FOLLOWER_REPLICAS = "leader.replication.throttled.replicas", "follower.replication.throttled.replicas"
LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"
Assignment = dict[TopicPartition, tuple[int, ...]]
LogDirs = dict[tuple[TopicPartition, int], str]
"""(partition, broker) -> the log dir its replica should be in."""
ANY_LOG_DIR = "any"
LOG_DIR_MOVE_TIMEOUT_S = 10.0
"""How long --execute asks a broker to move a replica it does not host yet (Kafka's --timeout)."""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("reassign-partitions", help="move partition replicas (kafka-reassign-partitions.sh)")
    add_admin_arguments(p)
    mode = p.add_mutually_exclusive_group(required=True)
    for flag, text in (("--generate", "propose an assignment of the given topics over --broker-list"),
                       ("--execute", "start the reassignment in --reassignment-json-file"),
                       ("--verify", "show the reassignment's status; remove the throttles once complete"),
                       ("--cancel", "cancel the reassignments in --reassignment-json-file"),
                       ("--list", "list the ongoing reassignments")):
        mode.add_argument(flag, action="store_true", help=text)
    p.add_argument("--topics-to-move-json-file", metavar="FILE", help='{"topics": [{"topic": "t"}], "version": 1}')
    p.add_argument("--broker-list", metavar="1,2,3", help="brokers to place the topics on (--generate)")
    p.add_argument("--disable-rack-aware", action="store_true", help="ignore racks when proposing (--generate)")
    p.add_argument("--reassignment-json-file", metavar="FILE", help="Kafka's reassignment JSON")
    p.add_argument("--throttle", type=int, default=-1, metavar="BYTES_PER_S",
                   help="replication throttle for the moving replicas (--execute)")
    p.add_argument("--replica-alter-log-dirs-throttle", type=int, default=-1, metavar="BYTES_PER_S",
                   help="throttle of the copies between a broker's log dirs (--execute)")
    p.add_argument("--additional", action="store_true", help="execute while other reassignments are ongoing")
    p.add_argument("--preserve-throttles", action="store_true", help="keep the throttles (--verify, --cancel)")
    p.set_defaults(func=run)


# -- JSON formats -------------------------------------------------------------------------------


def _read(path: str | None, option: str) -> str:
    if path is None:
        raise CommandError(f"{option} is required")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None


def parse_topics_to_move(text: str) -> list[str]:
    try:
        topics = [str(t["topic"]) for t in json.loads(text)["topics"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise CommandError(f'invalid topics-to-move JSON (expected {{"topics": [{{"topic": ...}}]}}): {exc}') from None
    duplicates = sorted({t for t in topics if topics.count(t) > 1})
    if duplicates:
        raise CommandError("List of topics to reassign contains duplicate entries: " + ",".join(duplicates))
    return topics


def parse_reassignment(text: str) -> Assignment:
    return parse_reassignment_and_log_dirs(text)[0]


def parse_reassignment_and_log_dirs(text: str) -> tuple[Assignment, LogDirs]:
    """Kafka's reassignment JSON, and the log dir each replica should be in where it names one
    (not "any"); duplicates, empty or repeated replicas and a log dir list of another length
    are refused."""
    log_dirs: LogDirs = {}
    try:
        entries = json.loads(text)["partitions"]
        out: Assignment = {}
        for e in entries:
            tp = TopicPartition(str(e["topic"]), int(e["partition"]))
            replicas = tuple(int(b) for b in e["replicas"])
            dirs = e.get("log_dirs")
            if dirs is not None:
                if len(dirs) != len(replicas):
                    raise CommandError(f"Size of replicas list {list(replicas)} is different from size of log dirs "
                                       f"list {list(dirs)} for partition {tp}")
                log_dirs.update({(tp, b): str(d) for b, d in zip(replicas, dirs, strict=True) if d != ANY_LOG_DIR})
            if tp in out:
                raise CommandError(f"Reassignment JSON contains duplicate partitions: {tp}")
            out[tp] = replicas
    except (ValueError, KeyError, TypeError) as exc:
        raise CommandError(f'invalid reassignment JSON (expected {{"version": 1, "partitions": [{{"topic": ..., '
                           f'"partition": ..., "replicas": [...]}}]}}): {exc}') from None
    if not out:
        raise CommandError("Partition reassignment list cannot be empty.")
    for tp, replicas in out.items():
        if not replicas:
            raise CommandError(f"Partition replica list cannot be empty: {tp}")
        if len(set(replicas)) != len(replicas):
            raise CommandError(f"Duplicate replica assignment found: {tp} -> {list(replicas)}")
    return out, log_dirs


def format_assignment(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    partitions = [
        {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas),
         "log_dirs": ["any"] * len(replicas)}
        for tp, replicas in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": partitions}, separators=(",", ":"))


def _tps(tps: Sequence[TopicPartition]) -> str:
    return ",".join(str(tp) for tp in sorted(tps))


# -- throttles ----------------------------------------------------------------------------------


def throttled_replicas(current: Assignment, target: Assignment) -> dict[str, tuple[str, str]]:
    """topic -> (leader entries: the current replicas, follower entries: the moving ones), as
    Kafka's calculateLeaderThrottles / calculateFollowerThrottles."""
    leader: dict[str, list[str]] = {}
    follower: dict[str, list[str]] = {}
    for tp, replicas in sorted(target.items()):
        existing = current.get(tp, ())
        if tuple(existing) == tuple(replicas):
            continue
        leader.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in existing)
        follower.setdefault(tp.topic, []).extend(f"{tp.partition}:{b}" for b in replicas if b not in existing)
    return {t: (",".join(leader.get(t, [])), ",".join(follower.get(t, []))) for t in sorted(set(leader) | set(follower))}


async def _set_throttles(admin: Admin, current: Assignment, target: Assignment, rate: int) -> None:
    for topic, (leader, follower) in throttled_replicas(current, target).items():
        ops = [(k, AlterConfigOp.SET, v) for k, v in ((LEADER_REPLICAS, leader), (FOLLOWER_REPLICAS, follower)) if v]
        await admin.incremental_alter_configs(ConfigResourceType.TOPIC, topic, ops)
    brokers = sorted({b for tp in target for b in (*current.get(tp, ()), *target[tp])})
    for b in brokers:
        await admin.incremental_alter_configs(
            ConfigResourceType.BROKER, str(b),
            [(LEADER_RATE, AlterConfigOp.SET, str(rate)), (FOLLOWER_RATE, AlterConfigOp.SET, str(rate))])


async def _clear_throttles(admin: Admin, topics: Sequence[str]) -> None:
    brokers = (await admin.describe_cluster()).broker_ids()
    for b in sorted(brokers):
        await admin.incremental_alter_configs(
            ConfigResourceType.BROKER, str(b),
            [(k, AlterConfigOp.DELETE, None) for k in (LEADER_RATE, FOLLOWER_RATE, LOG_DIRS_RATE)])
    print("Clearing broker-level throttles on brokers " + ",".join(str(b) for b in sorted(brokers)))
    for topic in sorted(set(topics)):
        await admin.incremental_alter_configs(
            ConfigResourceType.TOPIC, topic,
            [(k, AlterConfigOp.DELETE, None) for k in (LEADER_REPLICAS, FOLLOWER_REPLICAS)])
    print("Clearing topic-level throttles on topic " + ",".join(sorted(set(topics))))


# -- modes --------------------------------------------------------------------------------------


async def current_assignment(admin: Admin, topics: Sequence[str]) -> Assignment:
    described = await admin.describe_topics(sorted(set(topics)))
    return {
        TopicPartition(name, int(p.partition)): tuple(int(b) for b in p.replicas)
        for name, d in described.items()
        for p in d.partitions
    }


async def _generate(admin: Admin, args: argparse.Namespace) -> None:
    topics = parse_topics_to_move(_read(args.topics_to_move_json_file, "--topics-to-move-json-file"))
    if not args.broker_list:
        raise CommandError("--broker-list is required with --generate")
    try:
        brokers = [int(b) for b in args.broker_list.split(",") if b.strip()]
    except ValueError:
        raise CommandError(f"--broker-list expects broker ids, got '{args.broker_list}'") from None
    if len(set(brokers)) != len(brokers):
        raise CommandError("Duplicate broker list entries: " + args.broker_list)
    cluster = await admin.describe_cluster()
    racks = {b.node_id: b.rack for b in cluster.brokers}
    unknown = sorted(set(brokers) - set(racks))
    if unknown:
        raise CommandError("Some of the brokers in --broker-list are not registered: " + ",".join(map(str, unknown)))
    current = await current_assignment(admin, topics)
    proposed: Assignment = {}
    rng = random.Random()
    for topic in topics:
        parts = sorted(tp.partition for tp in current if tp.topic == topic)
        rf = len(current[TopicPartition(topic, parts[0])])
        placed = place_replicas(brokers, 0, len(parts), rf, rng, None if args.disable_rack_aware else racks)
        if isinstance(placed, ApiError):
            raise CommandError(placed.message or placed.code.name)
        proposed.update({TopicPartition(topic, p): r for p, r in zip(parts, placed, strict=True)})
    print("Current partition replica assignment")
    print(format_assignment(current))
    print()
    print("Proposed partition reassignment configuration")
    print(format_assignment(proposed))


async def _execute(admin: Admin, args: argparse.Namespace) -> None:
    target, log_dirs = parse_reassignment_and_log_dirs(_read(args.reassignment_json_file, "--reassignment-json-file"))
    ongoing = await admin.list_partition_reassignments()
    if ongoing and not args.additional:
        raise CommandError("Cannot execute because there is an existing partition assignment. Use --additional to "
                           "override this and create a new partition assignment in addition to the existing one.")
    current = await current_assignment(admin, [tp.topic for tp in target])
    missing = sorted(tp for tp in target if tp not in current)
    if missing:
        raise CommandError("Topic or partition not found: " + _tps(missing))
    print("Current partition replica assignment")
    print()
    print(format_assignment({tp: current[tp] for tp in target}))
    print()
    print("Save this to use as the --reassignment-json-file option during rollback")
    if args.throttle >= 0:
        await _set_throttles(admin, current, target, args.throttle)
        print("Warning: You must run --verify periodically, until the reassignment completes, to ensure the "
              "throttle is removed.")
        print(f"The inter-broker throttle limit was set to {args.throttle} B/s")
    results = await admin.alter_partition_reassignments(target)
    failed = {tp: e for tp, e in results.items() if e is not None}
    if failed:
        lines = [f"{tp}: {e.error_name}" + (f" ({e.error_message})" if e.error_message else "")
                 for tp, e in sorted(failed.items())]
        raise CommandError("Error reassigning partition(s):\n" + "\n".join(lines))
    print("Successfully started partition reassignment" + ("s" if len(target) > 1 else "") + " for " + _tps(list(target)))
    if log_dirs:
        if args.replica_alter_log_dirs_throttle >= 0:
            for b in sorted({b for _, b in log_dirs}):
                await admin.incremental_alter_configs(ConfigResourceType.BROKER, str(b), [
                    (LOG_DIRS_RATE, AlterConfigOp.SET, str(args.replica_alter_log_dirs_throttle))])
            print(f"The replica-alter-dir throttle limit was set to {args.replica_alter_log_dirs_throttle} B/s")
        await _move_log_dirs(admin, log_dirs)
        print("Successfully started log directory move" + ("s" if len(log_dirs) > 1 else "") + " for: "
              + ",".join(f"{tp}-{b}" for tp, b in sorted(log_dirs)))


async def _move_log_dirs(admin: Admin, log_dirs: LogDirs) -> None:
    """AlterReplicaLogDirs to each broker; a replica the broker does not host yet (a new
    replica of the reassignment) is asked again until LOG_DIR_MOVE_TIMEOUT_S."""
    pending = dict(log_dirs)
    deadline = asyncio.get_running_loop().time() + LOG_DIR_MOVE_TIMEOUT_S
    while pending:
        for broker in sorted({b for _, b in pending}):
            answers = await admin.alter_replica_log_dirs(broker, {tp: d for (tp, b), d in pending.items() if b == broker})
            for tp, error in answers.items():
                if error == ErrorCode.none:
                    pending.pop((tp, broker), None)
                elif error != ErrorCode.replica_not_available:
                    raise CommandError(f"Failed to move replica {tp}-{broker} to {log_dirs[(tp, broker)]}: {error.name}")
        if pending:
            if asyncio.get_running_loop().time() > deadline:
                raise CommandError("Timed out moving replicas to their log dirs (REPLICA_NOT_AVAILABLE): "
                                   + ",".join(f"{tp}-{b}" for tp, b in sorted(pending)))
            await asyncio.sleep(0.2)


def verify_lines(target: Assignment, current: Assignment,
                 ongoing: Mapping[TopicPartition, PartitionReassignment]) -> tuple[list[str], bool]:
    """Kafka's verify status lines, and whether every reassignment is complete."""
    lines = ["Status of partition reassignment:"]
    done = True
    for tp, replicas in sorted(target.items()):
        if tp in ongoing:
            lines.append(f"Reassignment of partition {tp} is still in progress.")
            done = False
        elif current.get(tp) == replicas:
            lines.append(f"Reassignment of partition {tp} is completed.")
        else:
            have = ",".join(map(str, current.get(tp, ())))
            lines.append(f"There is no active reassignment of partition {tp}, but replica set is {have} rather "
                         f"than {','.join(map(str, replicas))}.")
            done = False
    return lines, done


def log_dir_lines(log_dirs: LogDirs,
                  where: Mapping[tuple[TopicPartition, int], tuple[str | None, str | None]]) -> tuple[list[str], bool]:
    """Kafka's lines for each replica moving between log dirs, and whether every move is done."""
    lines = ["Status of replica log directory move:"]
    done = True
    for (tp, broker), target in sorted(log_dirs.items()):
        current, future = where.get((tp, broker), (None, None))
        replica = f"{tp}-{broker}"
        if current is None:
            lines.append(f"Partition {tp} cannot be found in any live log directory on broker {broker}.")
        elif current == target:
            lines.append(f"Reassignment of replica {replica} completed successfully.")
            continue
        elif future == target:
            lines.append(f"Reassignment of replica {replica} is still in progress.")
        else:
            lines.append(f"Partition {tp} on broker {broker} is not being moved from log dir {current} to {target}.")
        done = False
    return lines, done


async def _verify(admin: Admin, args: argparse.Namespace) -> bool:
    target, log_dirs = parse_reassignment_and_log_dirs(_read(args.reassignment_json_file, "--reassignment-json-file"))
    ongoing = await admin.list_partition_reassignments(list(target))
    current = await current_assignment(admin, [tp.topic for tp in target])
    lines, done = verify_lines(target, current, ongoing)
    if log_dirs:
        where: dict[tuple[TopicPartition, int], tuple[str | None, str | None]] = {}
        for broker in sorted({b for _, b in log_dirs}):
            found = await admin.replica_log_dirs(broker, [tp for tp, b in log_dirs if b == broker])
            where.update({(tp, broker): dirs for tp, dirs in found.items()})
        more, moved = log_dir_lines(log_dirs, where)
        lines += ["", *more]
        done = done and moved
    for line in lines:
        print(line)
    print()
    if done and not args.preserve_throttles:
        await _clear_throttles(admin, [tp.topic for tp in target])
    return done


async def _cancel(admin: Admin, args: argparse.Namespace) -> None:
    target = parse_reassignment(_read(args.reassignment_json_file, "--reassignment-json-file"))
    ongoing = await admin.list_partition_reassignments(list(target))
    active = [tp for tp in target if tp in ongoing]
    if active:
        results = await admin.alter_partition_reassignments({tp: None for tp in active})
        failed = {tp: e for tp, e in results.items() if e is not None}
        if failed:
            raise CommandError("Error cancelling partition reassignment(s):\n" + "\n".join(
                f"{tp}: {e.error_name}" for tp, e in sorted(failed.items())))
        print("Successfully cancelled partition reassignments for: " + _tps(active))
    else:
        print("None of the specified partition reassignments are active.")
    if not args.preserve_throttles:
        await _clear_throttles(admin, [tp.topic for tp in target])


def list_lines(ongoing: Mapping[TopicPartition, PartitionReassignment]) -> list[str]:
    if not ongoing:
        return ["No partition reassignments found."]
    lines = ["Current partition reassignments:"]
    for tp, r in sorted(ongoing.items()):
        lines.append(f"{tp}: replicas: {','.join(map(str, r.replicas))}. adding: "
                     f"{','.join(map(str, r.adding_replicas))}. removing: {','.join(map(str, r.removing_replicas))}.")
    return lines


async def run(args: argparse.Namespace) -> int:
    if (args.throttle >= 0 or args.replica_alter_log_dirs_throttle >= 0) and not args.execute:
        raise CommandError("--throttle and --replica-alter-log-dirs-throttle are only used with --execute")
    async with await Admin.connect(args.bootstrap_server, **admin_options(args)) as admin:
        if args.generate:
            await _generate(admin, args)
        elif args.execute:
            await _execute(admin, args)
        elif args.verify:  # exits 0 while partitions are still moving, as Kafka's does
            await _verify(admin, args)
        elif args.cancel:
            await _cancel(admin, args)
        else:
            for line in list_lines(await admin.list_partition_reassignments()):
                print(line)
    return 0
