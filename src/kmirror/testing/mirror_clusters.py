"""Helpers for mirroring tests on real processes: two `LocalCluster`s, polling, and the
`kmirror` CLI (`features`, `mirrors`, `topics --describe`) as values."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from kmirror.testing.metrics_scrape import mirror_fetch_requests
from kmirror.testing.processes import LocalCluster, kmirror, kmirror_in_process, write_properties

T = TypeVar("T")

DESCRIBE_HEADERS = ["MIRROR", "TOPIC", "PARTITION", "SOURCE-OFFSET", "DESTINATION-OFFSET", "LAG", "STATE"]
WAIT_TIMEOUT_S = 90
POLL_INTERVAL_S = 0.25


def wait_until(condition: Callable[[], T], what: str, timeout_s: float = WAIT_TIMEOUT_S,
               seen: Callable[[], object] | None = None,
               retry_on: tuple[type[Exception], ...] = ()) -> T:
    """Poll `condition` until it returns a true value, and return that value. An exception of
    `retry_on` (e.g. a broker briefly unavailable during an election) counts as not yet. On
    timeout the message carries `seen()`, or else the last value or exception."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = condition()
        except retry_on as exc:
            last = exc
        else:
            if value:
                return value
            last = value
        time.sleep(POLL_INTERVAL_S)
    observed = seen() if seen is not None else last
    raise AssertionError(f"timed out waiting for {what}; seen: {observed!r}")


def wait_mirror_fetch_rounds(metrics_port: int, mirror: str, rounds: int = 3) -> None:
    """Until every fetcher of `mirror` on the destination node has sent `rounds` more Fetch
    requests to the source: each has then applied `rounds - 1` full responses since the call,
    so whatever the source would hand the mirror is on the destination. This is how a test
    shows that something is NOT copied (past the LSO, while paused, after a refusal), without
    sleeping for a guessed time."""
    before = mirror_fetch_requests(metrics_port, mirror)
    if not before:
        raise AssertionError(f"mirror {mirror} has no fetcher on the node with metrics port {metrics_port}")
    wait_until(lambda: all(mirror_fetch_requests(metrics_port, mirror).get(k, 0) >= v + rounds
                           for k, v in before.items()),
               f"{rounds} more Fetch requests from each fetcher of mirror {mirror}",
               seen=lambda: (before, mirror_fetch_requests(metrics_port, mirror)))


@contextmanager
def clusters_up(*clusters: LocalCluster) -> Iterator[tuple[LocalCluster, ...]]:
    """Start the clusters in order; stop every started one, in reverse order, on exit."""
    started: list[LocalCluster] = []
    try:
        for cluster in clusters:
            started.append(cluster)
            cluster.up()
        yield clusters
    finally:
        for cluster in reversed(started):
            cluster.down()


def describe(bootstrap: str, *extra: str) -> dict[tuple[str, str, int], tuple[int, int, int, str]]:
    """`kmirror mirrors --describe` as {(mirror, topic, partition): (source offset, destination
    offset, lag, state)}; -1 for an unknown offset. Tests poll this: the command runs in this
    process (`kmirror_in_process`)."""
    out = kmirror_in_process("mirrors", "--bootstrap-server", bootstrap, "--describe", *extra).stdout
    lines = [line.split() for line in out.splitlines() if line.strip()]
    assert lines[0] == DESCRIBE_HEADERS, out
    return {(m, t, int(p)): (_offset(src), _offset(dst), _offset(lag), state)
            for m, t, p, src, dst, lag, state in lines[1:]}


def quorum_replication(bootstrap: str) -> dict[int, dict[str, str]]:
    """`kmirror metadata-quorum describe --replication` as {node id: {column: cell}} (run in
    this process when a test polls it)."""
    out = kmirror_in_process("metadata-quorum", "--bootstrap-server", bootstrap, "describe", "--replication").stdout
    header, *rows = [line.rstrip("\t").split("\t") for line in out.splitlines()]
    return {int(row[0]): {name.strip(): cell.strip() for name, cell in zip(header, row, strict=True)} for row in rows}


def quorum_leader(bootstrap: str) -> tuple[int, int]:
    """(LeaderId, LeaderEpoch) of `kmirror metadata-quorum describe --status`."""
    out = kmirror_in_process("metadata-quorum", "--bootstrap-server", bootstrap, "describe", "--status").stdout
    status = {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in out.splitlines())}
    return int(status["LeaderId"]), int(status["LeaderEpoch"])


def _offset(cell: str) -> int:
    """The tool prints `-` for an offset it does not know."""
    return -1 if cell == "-" else int(cell)


def partition_states(bootstrap: str, topic: str) -> dict[int, str]:
    return {p: row[3] for (_, t, p), row in describe(bootstrap).items() if t == topic}


def topic_summary(bootstrap: str, topic: str) -> dict[str, str]:
    """The summary line of `kmirror topics --describe`: Topic, TopicId, PartitionCount,
    ReplicationFactor, Configs. The command runs in this process (`kmirror_in_process`)."""
    first = kmirror_in_process("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", topic).stdout.splitlines()[0]
    return dict(field.split(": ", 1) for field in first.split("\t"))


def topic_id(bootstrap: str, topic: str) -> str:
    return topic_summary(bootstrap, topic)["TopicId"]


def bootstrap_of(endpoint: LocalCluster | str) -> str:
    return endpoint if isinstance(endpoint, str) else endpoint.bootstrap


def create_mirror(dest: LocalCluster | str, source: LocalCluster | str, mirror: str, topic: str | None,
                  config_path: Path, configs: dict[str, str] | None = None) -> None:
    """Through `dest` (a cluster or the bootstrap address the CLI talks to): enable
    `mirror.version=1`, create `mirror` towards `source` (a cluster or a bootstrap address) with
    `configs` besides `bootstrap.servers`, and add `topic` unless None."""
    cli = bootstrap_of(dest)
    kmirror("features", "--bootstrap-server", cli, "upgrade", "--feature", "mirror.version=1")
    mirror_configs = {"bootstrap.servers": bootstrap_of(source), **(configs or {})}
    write_properties(config_path, mirror_configs)
    kmirror("mirrors", "--bootstrap-server", cli, "--create", "--mirror", mirror, "--mirror-config", str(config_path))
    if topic is not None:
        kmirror("mirrors", "--bootstrap-server", cli, "--add", "--mirror", mirror, "--topic", topic)
