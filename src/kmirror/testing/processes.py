"""Real kmirror processes on loopback for tests and benchmarks, driven through the CLI
(`kmirror cluster up/down`), as an operator would."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import io
import os
import random
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kmirror.runtime import local_cluster
from kmirror.runtime.local_cluster import (
    CONTROLLER_NODE_ID,
    CONTROLLER_PORT_OFFSET,
    api_versions_ok,
    pid_path,
)

KMIRROR = [sys.executable, "-m", "kmirror"]


# Below Linux's ephemeral range (32768-60999 by default), so no client socket's local port
# lands in a block between its reservation and the node's bind.
PORT_RANGE = range(20000, 32000)
_PORT_LOCKS = Path(tempfile.gettempdir()) / "kmirror-test-ports.lock"
_port_lock_fd: int | None = None
_reserved: set[int] = set()


def free_port_block(nodes: int = 1) -> int:
    """A port P such that P..P+nodes-1 (brokers) and P+100..P+100+nodes (controller
    listeners) are free and reserved for this process until it exits.

    The reservation is a POSIX record lock on byte `port` of one shared file, taken without
    waiting, so concurrent test workers (pytest-xdist) and other test runs on the machine never
    get the same port; a bind check skips ports that processes outside this scheme hold."""
    global _port_lock_fd
    if _port_lock_fd is None:
        _port_lock_fd = os.open(_PORT_LOCKS, os.O_RDWR | os.O_CREAT, 0o666)
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    span = len(PORT_RANGE) - 101 - nodes
    for _ in range(2000):
        port = PORT_RANGE.start + rng.randrange(span)
        wanted = [*range(port, port + nodes), *range(port + 100, port + 101 + nodes)]
        if _reserved.intersection(wanted):
            continue
        locked = [p for p in wanted if _try_lock(_port_lock_fd, p)]
        if len(locked) == len(wanted) and all(_free(p) for p in wanted):
            _reserved.update(wanted)
            return port
        for p in locked:
            fcntl.lockf(_port_lock_fd, fcntl.LOCK_UN, 1, p, os.SEEK_SET)
    raise RuntimeError("no free port block")


def _try_lock(fd: int, port: int) -> bool:
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port, os.SEEK_SET)
    except OSError:
        return False
    return True


def _free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def write_properties(path: Path, props: Mapping[str, str]) -> Path:
    """`props` as a Java properties file at `path` (a CLI `--command-config` or `--mirror-config`)."""
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


def kmirror(*args: str, check: bool = True, timeout: float = 120, input: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*KMIRROR, *args], capture_output=True, text=True, timeout=timeout, input=input
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"kmirror {' '.join(args)} failed ({proc.returncode}): {proc.stderr}{proc.stdout}")
    return proc


_in_process_lock = threading.Lock()
_cli_main: Callable[[list[str]], int] | None = None


def use_cli_main(main: Callable[[list[str]], int] | None) -> None:
    """Let `kmirror_in_process` run commands with `main`: the CLI's `kmirror.cli.main.main`,
    which a test suite's conftest passes in (this layer sits below the CLI and does not import
    it). Until then, or after None, `kmirror_in_process` runs a process like `kmirror`."""
    global _cli_main
    _cli_main = main


def kmirror_in_process(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """`kmirror(*args)` run by the command's own `main` in this process, its stdout and stderr
    captured: for read-only commands a test polls (`mirrors --describe`, `topics --describe`),
    where a new interpreter per poll costs about 0.4 CPU-second of start and imports. The
    commands polled this way are also run as real processes by the CLI's tests. Without a
    `main` (see `use_cli_main`), or inside a running event loop (where `asyncio.run` is
    refused), it runs the process."""
    main = _cli_main
    if main is None:
        return kmirror(*args, check=check)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return kmirror(*args, check=check)
    out, err = io.StringIO(), io.StringIO()
    with _in_process_lock, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception:  # what the process would print as a traceback, exiting 1
            traceback.print_exc()
            code = 1
    proc = subprocess.CompletedProcess([*KMIRROR, *args], code, out.getvalue(), err.getvalue())
    if check and proc.returncode != 0:
        raise AssertionError(f"kmirror {' '.join(args)} failed ({proc.returncode}): {proc.stderr}{proc.stdout}")
    return proc


# Broker configs every test cluster starts with (a cluster's `overrides` win): as Kafka's own
# config/server.properties for development and tests, a new classic group's first rebalance
# is not held back for `group.initial.rebalance.delay.ms` (3 s by default) waiting for more
# members; each group a test starts would otherwise wait that long for its first assignment.
TEST_BROKER_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}
# Brokers of several nodes that notice a dead or paused broker in about 3 s (Kafka: 9 s session,
# 30 s replica lag), so failure tests do not wait out the defaults.
FAST_FAILURE_DETECTION = {
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
}


@dataclass
class LocalCluster:
    dir: Path
    port: int
    nodes: int = 1
    overrides: dict[str, str] = field(default_factory=dict)
    racks: list[str] | None = None
    # A block of 2 x nodes ports (`free_port_block(2 * nodes)`): broker i also listens on
    # LINK at link_port + i - 1 and advertises there its proxy, link_port + nodes + i - 1
    # (`kmirror.testing.link`).
    link_port: int | None = None
    controllers: int = 1
    """Dedicated controllers (the metadata quorum's voters) of a cluster of several brokers."""
    combined: bool = False
    """Every node a broker and a voter (`kmirror cluster up --combined`)."""
    per_broker: Callable[[int], dict[str, str]] | None = None
    """Configs of one broker (by node id), over `overrides`."""

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.port + i}" for i in range(self.nodes))

    @property
    def link_bootstrap(self) -> str:
        """The brokers through their link proxies."""
        assert self.link_port is not None, "a cluster without link_port"
        return ",".join(f"127.0.0.1:{self.link_port + self.nodes + i}" for i in range(self.nodes))

    def link_routes(self) -> list[tuple[int, int]]:
        """(proxy port, LINK listener port) of each broker."""
        assert self.link_port is not None, "a cluster without link_port"
        return [(self.link_port + self.nodes + i, self.link_port + i) for i in range(self.nodes)]

    def _link_listener(self, node_id: int) -> dict[str, str]:
        assert self.link_port is not None
        plain = f"PLAINTEXT://127.0.0.1:{self.port + node_id - 1}"
        controller = (f",CONTROLLER://127.0.0.1:{self.port + CONTROLLER_PORT_OFFSET + node_id - 1}"
                      if self.nodes == 1 or self.combined else "")
        return {"listeners": f"{plain},LINK://127.0.0.1:{self.link_port + node_id - 1}{controller}",
                "advertised.listeners": f"{plain},LINK://127.0.0.1:{self.link_port + self.nodes + node_id - 1}",
                "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,LINK:PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT"}

    def _broker_configs(self, node_id: int) -> dict[str, str]:
        link = self._link_listener(node_id) if self.link_port is not None else {}
        return {**link, **(self.per_broker(node_id) if self.per_broker is not None else {})}

    def up(self) -> None:
        """What `kmirror cluster up` does (its own tests drive the command), called in this
        process: a test suite starts clusters hundreds of times, and each CLI process costs
        more than half a CPU-second of interpreter start and imports."""
        try:
            local_cluster.up(self.dir, self.nodes, self.port, {**TEST_BROKER_DEFAULTS, **self.overrides}, self.racks,
                             self._broker_configs, self.controllers, self.combined)
        except local_cluster.ClusterError as exc:
            raise AssertionError(f"cluster up in {self.dir} failed: {exc}") from None

    def down(self) -> None:
        """What `kmirror cluster down` does, in this process."""
        local_cluster.down(self.dir)

    def __enter__(self) -> LocalCluster:
        """`with LocalCluster(...) as c:` brings the cluster up, and down at the end."""
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

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
        self._wait_started(node_id, self._launch(node_id), timeout_s)

    def _launch(self, node_id: int) -> subprocess.Popen[bytes]:
        node_dir = self.dir / f"node-{node_id}"
        with open(node_dir / "server.log", "ab") as log:
            proc = subprocess.Popen(
                [*KMIRROR, "server", "start", "--config", str(node_dir / "server.properties")],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )
        pid_path(self.dir, node_id).write_text(f"{proc.pid}\n")
        return proc

    def _wait_started(self, node_id: int, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.serving(node_id):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"node {node_id} did not come back: {self.log_text(node_id)[-2000:]}")
            time.sleep(0.1)

    def node_ids(self) -> list[int]:
        """Every node: the controller first (it starts first), then the brokers."""
        controllers = [CONTROLLER_NODE_ID + i for i in range(self.controllers)] if self.nodes > 1 and not self.combined else []
        return [*controllers, *range(1, self.nodes + 1)]

    def voter_ids(self) -> list[int]:
        """The voters of the metadata quorum."""
        if self.combined or self.nodes == 1:
            return list(range(1, self.nodes + 1))
        return [CONTROLLER_NODE_ID + i for i in range(self.controllers)]

    def crash(self) -> None:
        """kill -9 of every node at once: every process dies, what they wrote stays in the page cache."""
        for node_id in self.node_ids():
            self.kill9(node_id)

    def start_all(self, timeout_s: float = 120) -> None:
        """Start every node after `crash`, the controller first; combined voters together (a
        broker of theirs serves once they have elected a leader)."""
        if self.combined:
            for node_id, proc in [(node_id, self._launch(node_id)) for node_id in self.node_ids()]:
                self._wait_started(node_id, proc, timeout_s)
            return
        for node_id in self.node_ids():
            self.start_node(node_id, timeout_s)

    def limit_file_size(self, node_id: int, max_bytes: int) -> None:
        """A running node's writes fail past `max_bytes` of any file (EFBIG, RLIMIT_FSIZE): the
        storage refusing writes, as a full disk does, without a file system of its own."""
        pid = self.pid(node_id)
        _, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (max_bytes, hard))

    def fill_disk(self, node_id: int, headroom: int = 64 * 1024) -> None:
        """`limit_file_size` at `headroom` bytes past the node's largest file: the first file to
        grow that far fails the write, as on a disk that has just filled."""
        largest = 0
        for path in (self.dir / f"node-{node_id}" / "data").rglob("*"):
            with contextlib.suppress(FileNotFoundError):  # a file renamed or deleted meanwhile
                largest = max(largest, path.stat().st_size if path.is_file() else 0)
        self.limit_file_size(node_id, largest + headroom)

    def exited(self, node_id: int) -> bool:
        """Whether a node has stopped by itself (then reaped, its pid file removed)."""
        if local_cluster.process_alive(self.pid(node_id)):
            return False
        pid_path(self.dir, node_id).unlink()
        return True

    def pause(self, node_id: int) -> None:
        os.kill(self.pid(node_id), signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        os.kill(self.pid(node_id), signal.SIGCONT)

    def serving(self, node_id: int = 1) -> bool:
        if node_id >= CONTROLLER_NODE_ID:
            return api_versions_ok("127.0.0.1", self.port + CONTROLLER_PORT_OFFSET + node_id - CONTROLLER_NODE_ID)
        return api_versions_ok("127.0.0.1", self.port + node_id - 1)

    def log_text(self, node_id: int = 1) -> str:
        return (self.dir / f"node-{node_id}" / "server.log").read_text(errors="replace")


