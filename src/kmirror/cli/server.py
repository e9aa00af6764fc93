"""`kmirror server start`, `kmirror cluster up|down` (and kafka-cluster.sh's commands,
`kmirror.cli.cluster_tool`) and `kmirror demo`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kmirror.cli import cluster_tool


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    server = subparsers.add_parser("server", help="run a kmirror node")
    server_sub = server.add_subparsers(dest="server_command", required=True)
    start = server_sub.add_parser("start", help="run one node in the foreground")
    start.add_argument("--config", required=True, help="server.properties file")
    start.set_defaults(func=_server_start)

    cluster = subparsers.add_parser(
        "cluster", help="local clusters of kmirror processes; a cluster's id, brokers and unregistration (kafka-cluster.sh)")
    cluster_sub = cluster.add_subparsers(dest="cluster_command", required=True)
    up = cluster_sub.add_parser("up", help="start N nodes in the background; returns when they serve")
    up.add_argument("--nodes", type=int, default=1)
    up.add_argument("--dir", required=True, type=Path)
    up.add_argument("--port", type=int, default=9092)
    up.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="extra server.properties entry"
    )
    up.add_argument("--racks", default=None, metavar="R1,R2,...", help="broker.rack of broker 1, 2, ... (cycled)")
    up.add_argument("--controllers", type=int, default=1,
                    help="dedicated controllers, the voters of the metadata quorum (with --nodes 2 or more)")
    up.add_argument("--combined", action="store_true",
                    help="every node is a broker and a controller, a voter of the metadata quorum (combined mode)")
    up.set_defaults(func=_cluster_up)
    down = cluster_sub.add_parser("down", help="stop the nodes started in DIR")
    down.add_argument("--dir", required=True, type=Path)
    down.set_defaults(func=_cluster_down)
    cluster_tool.add_subcommands(cluster_sub)

    demo = subparsers.add_parser("demo", help="the disaster-recovery story: two clusters, a mirror, a Spark job that fails over, verify")
    demo.add_argument("--dir", type=Path, default=Path("demo-data"))
    demo.add_argument("--port", type=int, default=19092)
    demo.set_defaults(func=_demo)


def _server_start(args: argparse.Namespace) -> int:
    # A command loads its modules when it runs: `kmirror --help` stays quick.
    from kmirror.config.definitions import ConfigError
    from kmirror.config.server import ServerConfig
    from kmirror.runtime.node import run

    try:
        config = ServerConfig.load(args.config)
    except (ConfigError, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    return run(config)


def _cluster_up(args: argparse.Namespace) -> int:
    # A command loads its modules when it runs: `kmirror --help` stays quick.
    from kmirror.runtime.local_cluster import ClusterError, up

    extra = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"Error: --override expects KEY=VALUE, got {item!r}", file=sys.stderr)
            return 1
        extra[key] = value
    try:
        nodes = up(args.dir, args.nodes, args.port, extra, args.racks.split(",") if args.racks else None,
                   controllers=args.controllers, combined=args.combined)
    except ClusterError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    for node in nodes:
        print(f"node {node.node_id} serving on 127.0.0.1:{node.port} (log {node.log_path})")
    return 0


def _cluster_down(args: argparse.Namespace) -> int:
    # A command loads its modules when it runs: `kmirror --help` stays quick.
    from kmirror.runtime.local_cluster import down_nodes

    outcomes = down_nodes(args.dir)
    for node_id, outcome in outcomes:
        print(f"node {node_id}: {outcome}")
    print(f"stopped {sum(o.startswith('stopped') for _, o in outcomes)} node(s)")
    return 0


def _demo(args: argparse.Namespace) -> int:
    # A command loads its modules when it runs: `kmirror --help` stays quick.
    from kmirror.cli.demo import run_demo

    return run_demo(args.dir, args.port)
