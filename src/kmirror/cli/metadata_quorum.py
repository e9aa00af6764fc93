"""`kmirror metadata-quorum`: kafka-metadata-quorum.sh `describe --status` and
`describe --replication [--human-readable]`, from DescribeQuorum (key 55, which a broker
forwards to the active controller) and DescribeCluster (the cluster id).

`--status` prints Kafka's lines: ClusterId, LeaderId, LeaderEpoch, HighWatermark,
MaxFollowerLag, MaxFollowerLagTimeMs (over the voters: 0 with the leader alone),
CurrentVoters and CurrentObservers as Kafka's JSON-like lists. `--replication` prints one
row per node, the leader first, then followers and observers: its log end offset, lag behind
the leader and the times of its last fetch and last catch-up (epoch ms, or `N ms ago`).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kmirror.cli.command_config import add_admin_arguments, admin_options
from kmirror.cli.common import kafka_uuid
from kmirror.cli.errors import CommandError
from kmirror.client.admin import Admin
from kmirror.client.errors import check
from kmirror.protocol.entities import build, nested

DESCRIBE_QUORUM = 55
METADATA_TOPIC = "__cluster_metadata"


class _ReplicaState(Protocol):
    """DescribeQuorum's ReplicaState (v1+ adds the timestamps, v2 the directory id)."""

    replica_id: int
    log_end_offset: int


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    replica_id: int
    directory_id: str
    log_end_offset: int
    last_fetch_ms: int
    last_caught_up_ms: int


@dataclass(frozen=True, slots=True)
class QuorumInfo:
    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaInfo, ...]
    observers: tuple[ReplicaInfo, ...]
    endpoints: dict[int, tuple[str, ...]]
    """Node id -> its listeners, `NAME://host:port` (DescribeQuorum v2)."""

    @property
    def leader(self) -> ReplicaInfo:
        return next(v for v in self.voters if v.replica_id == self.leader_id)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("metadata-quorum", help="describe the metadata log's quorum (kafka-metadata-quorum.sh)")
    add_admin_arguments(p)
    commands = p.add_subparsers(dest="quorum_command", metavar="COMMAND", required=True)
    describe = commands.add_parser("describe", help="describe the metadata quorum")
    what = describe.add_mutually_exclusive_group(required=True)
    what.add_argument("--status", action="store_true", help="a summary of the quorum")
    what.add_argument("--replication", action="store_true", help="every node's position in the metadata log")
    describe.add_argument("--human-readable", action="store_true",
                          help="with --replication, times as 'N ms ago' rather than timestamps")
    p.set_defaults(func=run)


async def describe_metadata_quorum(admin: Admin) -> QuorumInfo:
    conn = await admin.cluster.any_connection()
    rt = conn.request_type(DESCRIBE_QUORUM)
    topic = build(nested(rt, "TopicData"), topic_name=METADATA_TOPIC,
                  partitions=(build(nested(rt, "PartitionData"), partition_index=0),))
    response = await conn.send(build(rt, topics=(topic,)))
    check(response.error_code, getattr(response, "error_message", None), "DescribeQuorum")
    partition = response.topics[0].partitions[0]
    check(partition.error_code, getattr(partition, "error_message", None), "DescribeQuorum")

    def replica(s: _ReplicaState) -> ReplicaInfo:
        directory = getattr(s, "replica_directory_id", None)
        return ReplicaInfo(int(s.replica_id), kafka_uuid(directory), int(s.log_end_offset),
                           int(getattr(s, "last_fetch_timestamp", -1)), int(getattr(s, "last_caught_up_timestamp", -1)))

    return QuorumInfo(
        int(partition.leader_id), int(partition.leader_epoch), int(partition.high_watermark),
        tuple(replica(v) for v in partition.current_voters), tuple(replica(o) for o in partition.observers),
        {int(n.node_id): tuple(f"{lst.name}://{lst.host}:{int(lst.port)}" for lst in n.listeners)
         for n in getattr(response, "nodes", ())},
    )


def format_status(cluster_id: str | None, quorum: QuorumInfo) -> list[str]:
    """Kafka's `handleDescribeStatus` lines."""
    leader = quorum.leader
    laggard = min(quorum.voters, key=lambda v: v.log_end_offset)
    if laggard is leader:
        lag_time = 0
    elif leader.last_caught_up_ms >= 0 and laggard.last_caught_up_ms >= 0:
        lag_time = leader.last_caught_up_ms - laggard.last_caught_up_ms
    else:
        lag_time = -1
    return [
        f"ClusterId:              {cluster_id}",
        f"LeaderId:               {quorum.leader_id}",
        f"LeaderEpoch:            {quorum.leader_epoch}",
        f"HighWatermark:          {quorum.high_watermark}",
        f"MaxFollowerLag:         {leader.log_end_offset - laggard.log_end_offset}",
        f"MaxFollowerLagTimeMs:   {lag_time}",
        f"CurrentVoters:          {_nodes(quorum.voters, quorum.endpoints)}",
        f"CurrentObservers:       {_nodes(quorum.observers, quorum.endpoints)}",
    ]


def _nodes(replicas: Sequence[ReplicaInfo], endpoints: dict[int, tuple[str, ...]]) -> str:
    """`[{"id": 3000, "endpoints": ["CONTROLLER://host:9093"]}, ...]`: a zero directory id and
    no endpoints are left out, as Kafka prints them."""
    out = []
    for r in replicas:
        text = f'{{"id": {r.replica_id}'
        if r.directory_id != kafka_uuid(None):
            text += f', "directoryId": "{r.directory_id}"'
        if endpoints.get(r.replica_id):
            text += ', "endpoints": [' + ", ".join(f'"{e}"' for e in endpoints[r.replica_id]) + "]"
        out.append(text + "}")
    return "[" + ", ".join(out) + "]"


def format_replication(quorum: QuorumInfo, human_readable: bool, now_ms: int) -> list[str]:
    """Kafka's `handleDescribeReplication` table: padded cells, each followed by a tab."""
    leader = quorum.leader

    def when(ms: int) -> str:
        return "-1" if ms < 0 else f"{now_ms - ms} ms ago" if human_readable else str(ms)

    rows = [["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp", "Status"]]
    groups = (([leader], "Leader"), ([v for v in quorum.voters if v is not leader], "Follower"),
              (list(quorum.observers), "Observer"))
    for replicas, status in groups:
        rows += [[str(r.replica_id), r.directory_id, str(r.log_end_offset), str(leader.log_end_offset - r.log_end_offset),
                  when(r.last_fetch_ms), when(r.last_caught_up_ms), status] for r in replicas]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["".join(f"{cell:<{width}}\t" for cell, width in zip(row, widths, strict=True)) for row in rows]


async def run(args: argparse.Namespace) -> int:
    if args.human_readable and not args.replication:
        raise CommandError("--human-readable is only valid with --replication")
    async with await Admin.connect(args.bootstrap_server, **admin_options(args)) as admin:
        quorum = await describe_metadata_quorum(admin)
        cluster_id = (await admin.describe_cluster()).cluster_id if args.status else None
    lines = format_status(cluster_id, quorum) if args.status else \
        format_replication(quorum, args.human_readable, int(time.time() * 1000))
    print("\n".join(lines))
    return 0
