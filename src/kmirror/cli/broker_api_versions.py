"""`kmirror broker-api-versions`: kafka-broker-api-versions.sh. ApiVersions of every broker,
each API this client knows printed as Kafka's `NodeApiVersions` prints it: `Name(key): min to
max [usable: v]`, `UNSUPPORTED` when the broker does not serve it, and `[unusable: node too
new]` / `[unusable: node too old]` when no version is common; APIs the broker serves and the
client does not know come last as `UNKNOWN(key)`.
"""

from __future__ import annotations

import argparse

from kio.schema.index import api_key_map

from kmirror.cli.command_config import add_admin_arguments, admin_options
from kmirror.client.admin import Admin
from kmirror.client.protocol import kio_versions
from kmirror.protocol.mirror.registry import MIRROR_APIS


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("broker-api-versions",
                              help="the API versions each broker serves (kafka-broker-api-versions.sh)")
    add_admin_arguments(p)
    p.set_defaults(func=run)


def api_name(api_key: int) -> str:
    """Kafka's name of an API (`ListOffsets`), from kio's, or the KIP-1279 RPC's."""
    if api_key in MIRROR_APIS:
        return MIRROR_APIS[api_key][0]
    return "".join(part.capitalize() for part in api_key_map[api_key].split("_"))


def version_lines(served: dict[int, tuple[int, int]]) -> list[str]:
    lines = []
    for key in sorted({*api_key_map, *MIRROR_APIS}):
        client = kio_versions(key)
        if key not in served:
            lines.append(f"{api_name(key)}({key}): UNSUPPORTED")
            continue
        low, high = served[key]
        common = [v for v in client if low <= v <= high]
        usable = (f"[usable: {max(common)}]" if common
                  else "[unusable: node too new]" if low > max(client) else "[unusable: node too old]")
        lines.append(f"{api_name(key)}({key}): {low} to {high} {usable}")
    lines += [f"UNKNOWN({key}): {low} to {high}" for key, (low, high) in sorted(served.items())
              if key not in api_key_map and key not in MIRROR_APIS]
    return lines


async def run(args: argparse.Namespace) -> int:
    async with await Admin.connect(args.bootstrap_server, **admin_options(args)) as admin:
        cluster = await admin.describe_cluster()
        for broker in sorted(cluster.brokers, key=lambda b: b.node_id):
            conn = await admin.cluster.connection(broker.node_id)
            rack = broker.rack if broker.rack is not None else "null"
            print(f"{broker.host}:{broker.port} (id: {broker.node_id} rack: {rack} isFenced: false) -> (")
            print("\t" + ",\n\t".join(version_lines(conn.api_versions)) + "\n)")
    return 0
