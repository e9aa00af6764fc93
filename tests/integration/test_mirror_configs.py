"""KIP-1279 mirror configs on real processes: `kmirror configs --entity-type mirrors` alters
and describes a mirror (IncrementalAlterConfigs / DescribeConfigs on the MIRROR resource).

The source node moves to another client port (same data, same cluster id); the mirror's
`bootstrap.servers` is altered to the new address and mirroring continues: every destination
batch equals the source's, offsets and bytes. Invalid alters get a one-line error and change
nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kmirror.testing.mirror_clusters import create_mirror, partition_states, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.segments import log_batches

pytestmark = pytest.mark.integration

TOPIC = "moves"
MIRROR = "m"


def produce(bootstrap: str, start: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": "zstd", "linger.ms": 10})
    for i in range(start, start + count):
        producer.produce(TOPIC, key=f"k{i % 5}".encode(), value=f"value {i} ".encode() * 10, headers=[("i", str(i))])
    assert producer.flush(30) == 0


def configs(dest: LocalCluster, *args: str, check: bool = True) -> tuple[int, str, str]:
    proc = kmirror("configs", "--bootstrap-server", dest.bootstrap, "--entity-type", "mirrors",
                   "--entity-name", MIRROR, *args, check=check)
    return proc.returncode, proc.stdout, proc.stderr


def described(dest: LocalCluster) -> dict[str, str]:
    _, out, _ = configs(dest, "--describe")
    return dict(re.match(r"\s+([^=]+)=(\S*) ", line).groups() for line in out.splitlines()[1:])  # type: ignore[union-attr]


def move_client_port(cluster: LocalCluster) -> LocalCluster:
    """Stop the single node and start it again, same data, its client listener on a new port."""
    cluster.down()
    new_port = free_port_block()
    props = cluster.dir / "node-1" / "server.properties"
    props.write_text(props.read_text().replace(f"127.0.0.1:{cluster.port}", f"127.0.0.1:{new_port}"))
    moved = LocalCluster(dir=cluster.dir, port=new_port)
    moved.start_node(1)
    return moved


def test_altering_bootstrap_servers_moves_the_mirror_to_the_new_source_address(
    clusters: tuple[LocalCluster, LocalCluster], tmp_path: Path
) -> None:
    source, dest = clusters
    kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", TOPIC, "--partitions", "1")
    produce(source.bootstrap, 0, 50)
    create_mirror(dest, source, MIRROR, TOPIC, tmp_path / "mirror.properties")
    assert described(dest) == {"bootstrap.servers": source.bootstrap}

    def identical(cluster: LocalCluster) -> bool:
        src = log_batches(cluster, TOPIC, 0)
        return bool(src) and log_batches(dest, TOPIC, 0) == src

    wait_until(lambda: identical(source), "the first records mirrored", seen=lambda: partition_states(
        dest.bootstrap, TOPIC))

    moved = move_client_port(source)
    try:
        produce(moved.bootstrap, 50, 40)
        # Invalid alters: one line on stderr, exit 1, the mirror's configs unchanged.
        for bad, text in (("no.such.key=1", "no.such.key"), ("bootstrap.servers=no-port", "no-port")):
            code, out, err = configs(dest, "--alter", "--add-config", bad, check=False)
            assert code == 1 and out == "" and len(err.strip().splitlines()) == 1, (out, err)
            assert "INVALID_CONFIG" in err and text in err, err
        code, _, err = configs(dest, "--alter", "--delete-config", "bootstrap.servers", check=False)
        assert code == 1 and "INVALID_CONFIG" in err, err
        assert described(dest) == {"bootstrap.servers": source.bootstrap}

        _, out, _ = configs(dest, "--alter", "--add-config", f"bootstrap.servers={moved.bootstrap}")
        assert out.strip() == f"Completed updating config for mirror {MIRROR}."
        assert described(dest) == {"bootstrap.servers": moved.bootstrap}
        wait_until(lambda: identical(moved) and len(log_batches(moved, TOPIC, 0)) > 1,
                   "the records produced after the move mirrored through the new address",
                   seen=lambda: partition_states(dest.bootstrap, TOPIC))
        assert partition_states(dest.bootstrap, TOPIC) == {0: "MIRRORING"}
        src = log_batches(moved, TOPIC, 0)
        assert src[-1][0] > 0 and log_batches(dest, TOPIC, 0) == src
    finally:
        moved.down()


def test_mirror_config_errors_for_a_missing_mirror_and_disabled_mirroring(cluster: LocalCluster) -> None:
    dest = cluster
    code, _, err = configs(dest, "--describe", check=False)
    assert code == 1 and "UNSUPPORTED_VERSION" in err, err  # mirror.version=0
    kmirror("features", "--bootstrap-server", dest.bootstrap, "upgrade", "--feature", "mirror.version=1")
    for action in (("--describe",), ("--alter", "--add-config", "bootstrap.servers=127.0.0.1:1")):
        code, _, err = configs(dest, *action, check=False)
        assert code == 1 and "RESOURCE_NOT_FOUND" in err and len(err.strip().splitlines()) == 1, err
