"""`kmirror cluster down` signals a pid only when it is that node's kmirror process."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kmirror.runtime.local_cluster import pid_path
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration


def test_down_leaves_a_foreign_pid_alone_and_says_when_a_node_was_dead(tmp_path: Path) -> None:
    cluster = LocalCluster(dir=tmp_path / "c", port=free_port_block(), nodes=2)
    cluster.up()
    stranger = subprocess.Popen(["sleep", "600"])
    try:
        node1 = cluster.pid(1)
        cluster.kill9(2)
        pid_path(cluster.dir, 2).write_text(f"{stranger.pid}\n")  # a pid reused by another process
        dead_controller = pid_path(cluster.dir, 3000)
        controller_pid = int(dead_controller.read_text())
        out = kmirror("cluster", "down", "--dir", str(cluster.dir)).stdout
        assert f"node 1: stopped (pid {node1})" in out
        assert f"node 2: pid {stranger.pid} is not this node's kmirror process; not signalled" in out
        assert f"node 3000: stopped (pid {controller_pid})" in out
        assert stranger.poll() is None  # still running
        # pid files are gone; a second down has nothing to do
        assert "stopped 0 node(s)" in kmirror("cluster", "down", "--dir", str(cluster.dir)).stdout
        # a pid file naming a dead process
        pid_path(cluster.dir, 1).write_text("999999\n")
        assert "node 1: already dead (pid 999999)" in kmirror("cluster", "down", "--dir", str(cluster.dir)).stdout
    finally:
        stranger.kill()
        stranger.wait()
        for node_id in (1, 2, 3000):
            pid_file = pid_path(cluster.dir, node_id)
            if pid_file.exists() and pid_file.read_text().strip().isdigit():
                pid = int(pid_file.read_text())
                if pid != stranger.pid:
                    try:
                        os.kill(pid, 9)
                    except ProcessLookupError:
                        pass


def test_every_node_of_a_replicated_cluster_stops_by_itself_on_sigterm(tmp_path: Path) -> None:
    """Controlled shutdown of each broker, then the controller: no node needs the SIGKILL that
    follows the grace period, and each logs its own orderly stop."""
    cluster = LocalCluster(dir=tmp_path / "c", port=free_port_block(3), nodes=3)
    cluster.up()
    try:
        kmirror("topics", "--bootstrap-server", cluster.bootstrap, "--create", "--topic", "t",
                "--partitions", "6", "--replication-factor", "3")
        kmirror("console-producer", "--bootstrap-server", cluster.bootstrap, "--topic", "t",
                input="".join(f"v{i}\n" for i in range(200)))
        pids = {n: cluster.pid(n) for n in (1, 2, 3, 3000)}
        out = kmirror("cluster", "down", "--dir", str(cluster.dir)).stdout
        for node_id, pid in pids.items():
            assert f"node {node_id}: stopped (pid {pid})" in out, out
            assert f"node {node_id} stopped" in cluster.log_text(node_id)
    finally:
        cluster.down()
