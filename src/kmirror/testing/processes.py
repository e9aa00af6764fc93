"""Real kmirror processes on loopback for tests and benchmarks, driven through the CLI
(`kmirror cluster up/down`), as an operator would."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from kmirror.runtime.local_cluster import api_versions_ok, pid_path

KMIRROR = [sys.executable, "-m", "kmirror"]


def free_port_block(nodes: int = 1) -> int:
    """A port P such that P..P+nodes-1 (brokers) and P+100..P+100+nodes (controller
    listeners) are free."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + 101 + nodes >= 65535:
            continue
        wanted = [*range(port, port + nodes), *range(port + 100, port + 101 + nodes)]
        if all(_free(p) for p in wanted):
            return port
    raise RuntimeError("no free port block")


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def kmirror(*args: str, check: bool = True, timeout: float = 120, input: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*KMIRROR, *args], capture_output=True, text=True, timeout=timeout, input=input
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"kmirror {' '.join(args)} failed ({proc.returncode}): {proc.stderr}{proc.stdout}")
    return proc


@dataclass
class LocalCluster:
    dir: Path
    port: int
    nodes: int = 1
    overrides: dict[str, str] = field(default_factory=dict)
    racks: list[str] | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.port + i}" for i in range(self.nodes))

    def up(self) -> None:
        args = ["cluster", "up", "--nodes", str(self.nodes), "--dir", str(self.dir), "--port", str(self.port)]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        if self.racks:
            args += ["--racks", ",".join(self.racks)]
        kmirror(*args)

    def down(self) -> None:
        kmirror("cluster", "down", "--dir", str(self.dir))

    def pid(self, node_id: int = 1) -> int:
        return int(pid_path(self.dir, node_id).read_text().strip())

    def kill9(self, node_id: int = 1) -> None:
        pid = self.pid(node_id)
        os.kill(pid, signal.SIGKILL)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        pid_path(self.dir, node_id).unlink()

    def start_node(self, node_id: int, timeout_s: float = 60) -> None:
        """Start one stopped node again with its existing server.properties (after kill9)."""
        node_dir = self.dir / f"node-{node_id}"
        with open(node_dir / "server.log", "ab") as log:
            proc = subprocess.Popen(
                [*KMIRROR, "server", "start", "--config", str(node_dir / "server.properties")],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )
        pid_path(self.dir, node_id).write_text(f"{proc.pid}\n")
        deadline = time.monotonic() + timeout_s
        while not self.serving(node_id):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"node {node_id} did not come back: {self.log_text(node_id)[-2000:]}")
            time.sleep(0.1)

    def pause(self, node_id: int) -> None:
        os.kill(self.pid(node_id), signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        os.kill(self.pid(node_id), signal.SIGCONT)

    def serving(self, node_id: int = 1) -> bool:
        return api_versions_ok("127.0.0.1", self.port + node_id - 1)

    def log_text(self, node_id: int = 1) -> str:
        return (self.dir / f"node-{node_id}" / "server.log").read_text(errors="replace")


