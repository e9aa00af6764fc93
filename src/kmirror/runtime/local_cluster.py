"""Local clusters for development and tests: `kmirror cluster up/down`.

Each node runs as its own `kmirror server start` process, detached from the caller, with
its `server.properties`, log and pid file (`node-<node id>.pid`) under DIR.

- `--nodes 1`: one combined node (broker and controller), node id 1, clients on `port`,
  controller listener on `port + 100`.
- `--nodes N --combined`: N combined nodes, every one a voter of the metadata quorum (Kafka's
  combined mode), node i with clients on `port + i - 1` and its controller listener on
  `port + 100 + i - 1`.
- `--nodes N > 1`: dedicated controllers (`--controllers C`, default 1: node ids 3000 ...
  3000 + C - 1, `CONTROLLER_NODE_ID`, on 127.0.0.1:(port + 100 + i), the voters of the
  metadata quorum), plus N broker-only nodes, broker i with node id i on
  127.0.0.1:(port + i - 1); `offsets.topic.replication.factor` is min(3, N).

`up` returns once every broker answers ApiVersions (a broker opens its listeners only after
the controller unfenced it) and lists all N brokers in its metadata; `down` stops the
brokers first (SIGTERM: controlled shutdown), then the controllers, with SIGKILL after a
grace period.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kmirror.client.admin import Admin, ClusterDescription

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0


class ClusterError(Exception):
    pass


@dataclass(frozen=True)
class NodeLayout:
    node_id: int
    port: int
    controller_port: int
    dir: Path

    @property
    def config_path(self) -> Path:
        return self.dir / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.dir / "server.log"


CONTROLLER_NODE_ID = 3000
CONTROLLER_PORT_OFFSET = 100


def pid_path(base: Path, node_id: int) -> Path:
    return base / f"node-{node_id}.pid"


def layout(base: Path, nodes: int, port: int, combined: bool = False) -> list[NodeLayout]:
    """The brokers: combined nodes with `combined` or when `nodes` is 1, each with its own
    controller listener; else the `controller_port` is that of the first dedicated controller."""
    return [
        NodeLayout(node_id=i, port=port + i - 1, controller_port=port + CONTROLLER_PORT_OFFSET + (i - 1) * combined,
                   dir=base / f"node-{i}")
        for i in range(1, nodes + 1)
    ]


def controller_layout(base: Path, port: int, index: int = 0) -> NodeLayout:
    node_id = CONTROLLER_NODE_ID + index
    controller_port = port + CONTROLLER_PORT_OFFSET + index
    return NodeLayout(node_id=node_id, port=controller_port, controller_port=controller_port,
                      dir=base / f"node-{node_id}")


def controller_layouts(base: Path, port: int, controllers: int) -> list[NodeLayout]:
    return [controller_layout(base, port, i) for i in range(controllers)]


def quorum_voters(controllers: list[NodeLayout]) -> str:
    """`controller.quorum.voters` of a cluster with these controllers."""
    return ",".join(f"{c.node_id}@127.0.0.1:{c.controller_port}" for c in controllers)


def is_controller_id(node_id: int) -> bool:
    return node_id >= CONTROLLER_NODE_ID


def controller_properties(node: NodeLayout, extra: dict[str, str], voters: str | None = None) -> str:
    props = {
        "node.id": str(node.node_id),
        "process.roles": "controller",
        "listeners": f"CONTROLLER://127.0.0.1:{node.controller_port}",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": voters or f"{node.node_id}@127.0.0.1:{node.controller_port}",
        "log.dirs": str(node.dir / "data"),
    }
    props.update(extra)
    return "".join(f"{k}={v}\n" for k, v in props.items())


def broker_properties(node: NodeLayout, nodes: int, extra: dict[str, str], voters: str | None = None) -> str:
    props = {
        "node.id": str(node.node_id),
        "process.roles": "broker",
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": voters or f"{CONTROLLER_NODE_ID}@127.0.0.1:{node.controller_port}",
        "log.dirs": str(node.dir / "data"),
        "offsets.topic.replication.factor": str(min(3, nodes)),
    }
    props.update(extra)
    return "".join(f"{k}={v}\n" for k, v in props.items())


def server_properties(node: NodeLayout, extra: dict[str, str], voters: list[NodeLayout]) -> str:
    """A combined node's; `voters`: the combined nodes of its cluster (itself alone, or several)."""
    props = {
        "node.id": str(node.node_id),
        "process.roles": "broker,controller",
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port}",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.voters": quorum_voters(voters),
        "log.dirs": str(node.dir / "data"),
    }
    if len(voters) > 1:  # one node keeps the default
        props["offsets.topic.replication.factor"] = str(min(3, len(voters)))
    props.update(extra)
    return "".join(f"{k}={v}\n" for k, v in props.items())


def api_versions_ok(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """True when a Kafka listener answers an ApiVersions v0 request."""
    request = struct.pack(">hhih", 18, 0, 1, -1)
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(struct.pack(">i", len(request)) + request)
            head = _recv_exact(sock, 4)
            (size,) = struct.unpack(">i", head)
            body = _recv_exact(sock, size)
            (correlation_id, error_code) = struct.unpack_from(">ih", body, 0)
            return correlation_id == 1 and error_code == 0
    except OSError:
        return False


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def _launch(base: Path, node: NodeLayout, text: str) -> subprocess.Popen[bytes]:
    pid_file = pid_path(base, node.node_id)
    if pid_file.exists() and process_alive(int(pid_file.read_text().strip() or 0)):
        raise ClusterError(f"node {node.node_id} already running (pid file {pid_file})")
    node.dir.mkdir(parents=True, exist_ok=True)
    node.config_path.write_text(text)
    with open(node.log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kmirror", "server", "start", "--config", str(node.config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    pid_file.write_text(f"{proc.pid}\n")
    return proc


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on host:port (a bind as the node's listener would do succeeds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _check_ports_free(nodes: list[NodeLayout]) -> None:
    """Refuse to start when another process holds a port of the layout: its answers would be
    taken for this cluster's node."""
    for node in nodes:
        for port, listener in ((node.port, "listener"), (node.controller_port, "controller listener")):
            if not port_free(port):
                raise ClusterError(f"port {port} (node {node.node_id} {listener}) is already in use by another "
                                   f"process; choose another --port")


def _wait_serving(node: NodeLayout, proc: subprocess.Popen[bytes], deadline: float) -> None:
    """Wait until `proc` itself serves: it answers ApiVersions and its metadata carries the
    cluster id its `meta.properties` holds (another process on the port answers otherwise)."""
    while not (proc.poll() is None and api_versions_ok("127.0.0.1", node.port) and _is_own_node(node)):
        if proc.poll() is not None:
            raise ClusterError(f"node {node.node_id} exited with {proc.returncode}: {_tail(node.log_path)}")
        if time.monotonic() > deadline:
            raise ClusterError(f"node {node.node_id} not serving on port {node.port} after {READY_TIMEOUT_S:.0f}s")
        time.sleep(0.1)


def _is_own_node(node: NodeLayout) -> bool:
    """A controller-only node serves no Metadata: its process being alive and its port having
    been free before the start stand for it. A broker answers with its meta.properties' cluster id."""
    if is_controller_id(node.node_id):
        return True
    cluster_id = _meta_cluster_id(node.dir / "data")
    return cluster_id is not None and cluster_id == cluster_id_at("127.0.0.1", node.port)


def _meta_cluster_id(log_dir: Path) -> str | None:
    try:
        lines = (log_dir / "meta.properties").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        key, sep, value = line.partition("=")
        if sep and key.strip() == "cluster.id":
            return value.strip()
    return None


def broker_extra(extra: dict[str, str], node: NodeLayout, racks: list[str] | None,
                 per_broker: Callable[[int], dict[str, str]] | None = None) -> dict[str, str]:
    """Per-broker overrides: `metrics.port` counts up from the given port like the listeners,
    broker i gets `broker.rack=racks[i-1]` when racks are given, and `per_broker(i)` last."""
    out = dict(extra)
    if "metrics.port" in out and int(out["metrics.port"]) > 0:
        out["metrics.port"] = str(int(out["metrics.port"]) + node.node_id - 1)
    if racks:
        out["broker.rack"] = racks[(node.node_id - 1) % len(racks)]
    if per_broker is not None:
        out.update(per_broker(node.node_id))
    return out


def up(
    base: Path, nodes: int, port: int, extra: dict[str, str] | None = None, racks: list[str] | None = None,
    per_broker: Callable[[int], dict[str, str]] | None = None, controllers: int = 1, combined: bool = False,
) -> list[NodeLayout]:
    base.mkdir(parents=True, exist_ok=True)
    extra = extra or {}
    deadline = time.monotonic() + READY_TIMEOUT_S
    combined = combined or nodes == 1
    brokers = layout(base, nodes, port, combined)
    if controllers < 1:
        raise ClusterError(f"--controllers {controllers}: a cluster needs at least one controller")
    if controllers > 1 and combined:
        raise ClusterError("several controllers need dedicated brokers: --nodes 2 or more, without --combined "
                           "(with --combined, every node is a voter)")
    quorum = brokers if combined else controller_layouts(base, port, controllers)
    _check_ports_free(brokers if combined else [*quorum, *brokers])
    if combined:  # every node is a voter: they elect a leader together, so they start together
        started = [(node, _launch(base, node, server_properties(
            node, broker_extra(extra, node, racks, per_broker), brokers))) for node in brokers]
    else:
        voters = quorum_voters(quorum)
        # the brokers' metrics ports count up from `metrics.port`; the controllers serve none here
        controller_extra = {k: v for k, v in extra.items() if k != "metrics.port"}
        launched = [(c, _launch(base, c, controller_properties(c, controller_extra, voters))) for c in quorum]
        for controller, controller_proc in launched:
            _wait_serving(controller, controller_proc, deadline)
        started = [
            (node, _launch(base, node, broker_properties(node, nodes, broker_extra(extra, node, racks, per_broker),
                                                         voters)))
            for node in brokers
        ]
    for node, proc in started:
        _wait_serving(node, proc, deadline)
    wanted = {node.node_id for node in brokers}
    for node, proc in started:
        while set(listed_brokers("127.0.0.1", node.port)) != wanted:
            if proc.poll() is not None:
                raise ClusterError(f"node {node.node_id} exited with {proc.returncode}: {_tail(node.log_path)}")
            if time.monotonic() > deadline:
                raise ClusterError(f"broker {node.node_id} does not list all {nodes} brokers after {READY_TIMEOUT_S:.0f}s")
            time.sleep(0.1)
    return brokers


def listed_brokers(host: str, port: int) -> list[int]:
    """Broker ids in a Metadata response of the broker at host:port ([] when unreachable)."""
    cluster = _describe_cluster(host, port)
    return [] if cluster is None else sorted(cluster.broker_ids())


def cluster_id_at(host: str, port: int) -> str | None:
    """The cluster id the broker at host:port reports (None when unreachable)."""
    cluster = _describe_cluster(host, port)
    return None if cluster is None else cluster.cluster_id


def _describe_cluster(host: str, port: int) -> ClusterDescription | None:
    async def describe() -> ClusterDescription:
        async with await Admin.connect(f"{host}:{port}") as admin:
            return await admin.describe_cluster()

    try:
        return asyncio.run(describe())
    except Exception:  # unreachable, or not a Kafka broker: the caller keeps waiting
        return None


def down(base: Path) -> list[int]:
    """Stops every node with a pid file in `base` (see `down_nodes`); returns their node ids."""
    return [node_id for node_id, _ in down_nodes(base)]


def down_nodes(base: Path) -> list[tuple[int, str]]:
    """Stops every node with a pid file in `base`, brokers before the controllers (their
    controlled shutdown needs one): (node id, what happened) per pid file. The combined voters
    of a quorum stop together: the last ones stopped one at a time would have no majority left
    to elect the controller their controlled shutdown needs.

    A pid is signalled only when its /proc/PID/cmdline is `kmirror server start --config`
    with this node's server.properties: a pid file left by a dead node may name a process
    that reused the pid, which is left alone."""

    def node_of(path: Path) -> int:
        return int(path.stem.split("-", 1)[1])

    pid_files = sorted(base.glob("node-*.pid"), key=lambda path: (is_controller_id(node_of(path)), node_of(path)))
    together = [path for path in pid_files if _is_combined_voter(base / f"node-{node_of(path)}" / "server.properties")]
    groups = [together] if together else []
    groups += [[path] for path in pid_files if path not in together]
    outcomes = []
    for group in groups:
        signalled: dict[int, int] = {}
        for pid_file in group:
            node_id = node_of(pid_file)
            text = pid_file.read_text().strip()
            pid = int(text) if text.isdigit() else 0
            if not process_alive(pid):
                outcomes.append((node_id, f"already dead (pid {pid})" if pid else "no pid recorded"))
            elif not is_node_process(pid, base / f"node-{node_id}" / "server.properties"):
                outcomes.append((node_id, f"pid {pid} is not this node's kmirror process; not signalled"))
            else:
                signalled[node_id] = pid
        ended = stop_pids(list(signalled.values()))
        for node_id, pid in signalled.items():
            outcomes.append((node_id, f"stopped (pid {pid})" if ended[pid]
                             else f"did not stop within {STOP_TIMEOUT_S:.0f} s of SIGTERM; killed (pid {pid})"))
        for pid_file in group:
            pid_file.unlink(missing_ok=True)
    return outcomes


def _is_combined_voter(config: Path) -> bool:
    """A broker and controller that is one voter of several (from its server.properties)."""
    try:
        lines = config.read_text().splitlines()
    except OSError:
        return False
    props = dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))
    roles = props.get("process.roles", "").split(",")
    return "broker" in roles and "controller" in roles and "," in props.get("controller.quorum.voters", "")


def is_node_process(pid: int, config: Path) -> bool:
    """True when `pid` runs `kmirror server start --config <config>` (read from /proc)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return False
    if "kmirror" not in argv or "--config" not in argv:
        return False
    k, i = argv.index("kmirror"), argv.index("--config")
    if argv[k + 1:k + 3] != ["server", "start"] or i + 1 >= len(argv):
        return False
    try:
        cwd = os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return False
    return (Path(cwd) / argv[i + 1]).resolve() == config.resolve()


def stop_pids(pids: list[int], timeout_s: float = STOP_TIMEOUT_S) -> dict[int, bool]:
    """SIGTERM to each, then SIGKILL to those alive after `timeout_s`; per pid, True when the
    process ended by itself."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    alive = set(pids)
    while alive and time.monotonic() < deadline:
        alive = {pid for pid in alive if process_alive(pid)}
        if alive:
            time.sleep(0.05)
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return {pid: pid not in alive for pid in pids}


def process_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)  # reap if it is our child
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return True


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"
