"""`kmirror cluster cluster-id | unregister | list-endpoints`: kafka-cluster.sh's commands,
beside `cluster up` / `down` (local clusters).

- `cluster-id`: `Cluster ID: <id>` (DescribeCluster);
- `unregister --id N`: UnregisterBroker (key 64) for a broker that is gone for good (after its
  partitions were moved away with `reassign-partitions`): `Broker N is no longer registered.`;
- `list-endpoints [--include-fenced-brokers]`: the brokers, one row each (`ID HOST PORT RACK
  STATE ENDPOINT_TYPE`), from DescribeCluster v2.
The client is imported only when one of these runs: a node's start imports no client tool.
"""

from __future__ import annotations

import argparse

from kmirror.cli.command_config import add_admin_arguments, admin_options
from kmirror.cli.errors import CommandError

UNREGISTER_BROKER = 64
DESCRIBE_CLUSTER = 60


def add_subcommands(cluster_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster_id = cluster_sub.add_parser("cluster-id", help="print the cluster id (kafka-cluster.sh cluster-id)")
    add_admin_arguments(cluster_id, "--config")
    cluster_id.set_defaults(func=_cluster_id)
    unregister = cluster_sub.add_parser("unregister", help="unregister a broker (kafka-cluster.sh unregister)")
    add_admin_arguments(unregister, "--config")
    unregister.add_argument("--id", type=int, required=True, help="the id of the broker to unregister")
    unregister.set_defaults(func=_unregister)
    endpoints = cluster_sub.add_parser("list-endpoints", help="list the brokers (kafka-cluster.sh list-endpoints)")
    add_admin_arguments(endpoints, "--config")
    endpoints.add_argument("--include-fenced-brokers", action="store_true", help="also the fenced brokers")
    endpoints.set_defaults(func=_list_endpoints)


async def _describe_cluster(args: argparse.Namespace, include_fenced: bool) -> tuple[str, list[tuple[int, str, int, str | None, bool]]]:
    from kmirror.client.admin import Admin
    from kmirror.client.errors import check
    from kmirror.client.protocol import choose_version, request_schema
    from kmirror.protocol.entities import build

    async with await Admin.connect(args.bootstrap_server, **admin_options(args)) as admin:
        conn = await admin.cluster.any_connection()
        version = choose_version(DESCRIBE_CLUSTER, conn.api_versions, {})  # v2: fenced brokers too
        if version is None:
            raise CommandError("the broker does not serve DescribeCluster")
        response = await conn.send(build(request_schema(DESCRIBE_CLUSTER, version),
                                         include_cluster_authorized_operations=False, endpoint_type=1,
                                         include_fenced_brokers=include_fenced))
        check(response.error_code, getattr(response, "error_message", None), "DescribeCluster")
        return response.cluster_id, [(int(b.broker_id), b.host, int(b.port), b.rack, bool(getattr(b, "is_fenced", False)))
                                     for b in response.brokers]


async def _cluster_id(args: argparse.Namespace) -> int:
    cluster_id, _ = await _describe_cluster(args, False)
    print(f"Cluster ID: {cluster_id}")
    return 0


async def _unregister(args: argparse.Namespace) -> int:
    from kmirror.client.admin import Admin
    from kmirror.client.errors import check

    async with await Admin.connect(args.bootstrap_server, **admin_options(args)) as admin:
        conn = await admin.cluster.any_connection()
        response = await conn.send(conn.build_request(UNREGISTER_BROKER, broker_id=args.id))
        check(response.error_code, response.error_message, f"unregister broker {args.id}")
    print(f"Broker {args.id} is no longer registered.")
    return 0


async def _list_endpoints(args: argparse.Namespace) -> int:
    _, brokers = await _describe_cluster(args, args.include_fenced_brokers)
    rows = [("ID", "HOST", "PORT", "RACK", "STATE", "ENDPOINT_TYPE")] + [
        (str(node_id), host, str(port), rack or "null", "fenced" if fenced else "unfenced", "broker")
        for node_id, host, port, rack, fenced in sorted(brokers)]
    widths = [max(10, *(len(row[i]) for row in rows)) for i in range(6)]
    for row in rows:
        print(" ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0
