"""`kmirror cluster up` never takes another process on its ports for its own node."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource

from kmirror.runtime.local_cluster import NodeLayout, _is_own_node
from kmirror.testing.mirror_clusters import quorum_replication
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A plain TCP listener that is not a kmirror node."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    try:
        yield sock
    finally:
        sock.close()


def _up(base: Path, port: int) -> tuple[int, str]:
    proc = kmirror("cluster", "up", "--nodes", "1", "--dir", str(base), "--port", str(port), check=False)
    return proc.returncode, proc.stderr + proc.stdout


def test_a_taken_client_port_is_refused_with_its_number(tmp_path: Path, listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    code, out = _up(tmp_path / "c", port)
    assert code == 1 and f"port {port} (node 1 listener) is already in use" in out, out
    assert not list((tmp_path / "c").glob("node-*.pid"))  # nothing was started


def test_a_taken_controller_port_is_refused_with_its_number(tmp_path: Path, listener: socket.socket) -> None:
    controller_port = listener.getsockname()[1]
    code, out = _up(tmp_path / "c", controller_port - 100)
    assert code == 1 and f"port {controller_port} (node 1 controller listener) is already in use" in out, out


def test_another_cluster_on_the_port_is_not_taken_for_the_new_node(tmp_path: Path) -> None:
    other = LocalCluster(dir=tmp_path / "other", port=free_port_block())
    other.up()
    try:
        code, out = _up(tmp_path / "mine", other.port)
        assert code == 1 and f"port {other.port}" in out, out
        # The identity check itself: a node directory of another cluster id does not own the port.
        mine = NodeLayout(node_id=1, port=other.port, controller_port=other.port + 100, dir=tmp_path / "mine2" / "node-1")
        (mine.dir / "data").mkdir(parents=True)
        (mine.dir / "data" / "meta.properties").write_text("version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=1\n")
        assert not _is_own_node(mine)
        theirs = NodeLayout(node_id=1, port=other.port, controller_port=other.port + 100, dir=other.dir / "node-1")
        assert _is_own_node(theirs)
    finally:
        other.down()


def test_overrides_and_racks_reach_every_broker(tmp_path: Path) -> None:
    port = free_port_block(2)
    proc = kmirror("cluster", "up", "--nodes", "2", "--dir", str(tmp_path / "c"), "--port", str(port),
                   "--racks", "rack-a,rack-b", "--override", "log.retention.ms=1234567")
    try:
        assert "node 2 serving" in proc.stdout, proc.stdout
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        brokers = admin.describe_cluster().result(timeout=30).nodes
        assert sorted((b.id, b.rack) for b in brokers) == [(1, "rack-a"), (2, "rack-b")]
        for broker_id in (1, 2):
            resource = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
            configs = admin.describe_configs([resource])[resource].result(timeout=30)
            assert configs["log.retention.ms"].value == "1234567"
        assert kmirror("cluster", "up", "--dir", str(tmp_path / "d"), "--port", str(free_port_block()),
                       "--override", "no-equals-sign", check=False).returncode == 1
    finally:
        kmirror("cluster", "down", "--dir", str(tmp_path / "c"))


@pytest.mark.parametrize(("nodes", "controllers", "message"), [
    ("1", "3", "several controllers need dedicated brokers: --nodes 2 or more"),
    ("3", "0", "--controllers 0: a cluster needs at least one controller"),
])
def test_a_quorum_of_controllers_that_cannot_be_is_refused(tmp_path: Path, nodes: str, controllers: str,
                                                         message: str) -> None:
    proc = kmirror("cluster", "up", "--nodes", nodes, "--controllers", controllers, "--dir", str(tmp_path / "c"),
                   "--port", str(free_port_block(3)), check=False)
    assert proc.returncode == 1 and f"Error: {message}" in proc.stderr, proc.stderr + proc.stdout
    assert not list((tmp_path / "c").glob("node-*.pid"))


def test_combined_voters_up_and_down(tmp_path: Path) -> None:
    """`--combined`: every node a broker and a voter, no dedicated controller; `down` stops the
    three together, each within its grace period (none killed)."""
    port = free_port_block(3)
    refused = kmirror("cluster", "up", "--nodes", "3", "--controllers", "3", "--combined", "--dir",
                      str(tmp_path / "r"), "--port", str(port), check=False)
    assert refused.returncode == 1 and "with --combined, every node is a voter" in refused.stderr, refused.stderr
    proc = kmirror("cluster", "up", "--nodes", "3", "--combined", "--dir", str(tmp_path / "c"), "--port", str(port))
    try:
        assert [line.split()[1] for line in proc.stdout.splitlines() if " serving on " in line] == ["1", "2", "3"]
        assert sorted(p.name for p in (tmp_path / "c").glob("node-*.pid")) == ["node-1.pid", "node-2.pid", "node-3.pid"]
        voters = ",".join(f"{n}@127.0.0.1:{port + 100 + n - 1}" for n in (1, 2, 3))
        assert f"controller.quorum.voters={voters}\n" in (tmp_path / "c" / "node-2" / "server.properties").read_text()
        rows = quorum_replication(f"127.0.0.1:{port + 1}")
        assert sorted(rows) == [1, 2, 3] and sorted(row["Status"] for row in rows.values()) == [
            "Follower", "Follower", "Leader"]
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        brokers = admin.describe_cluster().result(timeout=30).nodes
        assert sorted(b.id for b in brokers) == [1, 2, 3]
    finally:
        down = kmirror("cluster", "down", "--dir", str(tmp_path / "c"))
    outcomes = [line for line in down.stdout.splitlines() if line.startswith("node ")]
    assert len(outcomes) == 3 and all(": stopped (pid " in line for line in outcomes), down.stdout
