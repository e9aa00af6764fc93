"""The `kmirror` CLI end to end against a real node started with `kmirror cluster up`."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kmirror.testing.processes import free_port_block

pytestmark = pytest.mark.integration


def kmirror(*args: str, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kmirror", *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    base = tmp_path_factory.mktemp("cluster")
    port = free_port_block()
    up = kmirror("cluster", "up", "--nodes", "1", "--dir", str(base), "--port", str(port), timeout=120)
    assert up.returncode == 0, up.stderr
    try:
        yield f"127.0.0.1:{port}", base
    finally:
        kmirror("cluster", "down", "--dir", str(base))


def test_topics_lifecycle(node: tuple[str, Path]) -> None:
    bootstrap, _ = node
    created = kmirror("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "life", "--partitions", "2",
                      "--replication-factor", "1", "--config", "retention.ms=60000")
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == "Created topic life."
    again = kmirror("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "life")
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr and "Traceback" not in again.stderr
    quiet = kmirror("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "life", "--if-not-exists")
    assert quiet.returncode == 0
    listed = kmirror("topics", "--bootstrap-server", bootstrap, "--list")
    assert "life" in listed.stdout.split()
    described = kmirror("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", "life")
    assert described.returncode == 0, described.stderr
    lines = described.stdout.strip().splitlines()
    assert lines[0].startswith("Topic: life\tTopicId: ") and "PartitionCount: 2\tReplicationFactor: 1" in lines[0]
    assert "retention.ms=60000" in lines[0]
    assert lines[1] == "\tTopic: life\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1"
    altered = kmirror("topics", "--bootstrap-server", bootstrap, "--alter", "--topic", "life", "--partitions", "3")
    assert altered.returncode == 0, altered.stderr
    described = kmirror("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", "life")
    assert "PartitionCount: 3" in described.stdout
    deleted = kmirror("topics", "--bootstrap-server", bootstrap, "--delete", "--topic", "life")
    assert deleted.returncode == 0, deleted.stderr
    missing = kmirror("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", "life")
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in missing.stderr


def test_configs_alter_and_describe(node: tuple[str, Path]) -> None:
    bootstrap, _ = node
    assert kmirror("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "conf").returncode == 0
    base = ("configs", "--bootstrap-server", bootstrap, "--entity-type", "topics", "--entity-name", "conf")
    altered = kmirror(*base, "--alter", "--add-config", "retention.ms=1000,cleanup.policy=compact")
    assert altered.returncode == 0, altered.stderr
    assert altered.stdout.strip() == "Completed updating config for topic conf."
    described = kmirror(*base, "--describe")
    assert described.stdout.splitlines()[0] == "Dynamic configs for topic conf are:"
    assert "  cleanup.policy=compact sensitive=false" in described.stdout
    assert "  retention.ms=1000 sensitive=false" in described.stdout
    assert kmirror(*base, "--alter", "--delete-config", "retention.ms").returncode == 0
    assert "retention.ms=" not in kmirror(*base, "--describe").stdout
    invalid = kmirror(*base, "--alter", "--add-config", "no.such.config=1")
    assert invalid.returncode == 1 and invalid.stderr.startswith("Error: ") and "Traceback" not in invalid.stderr


def test_produce_consume_and_dump_log(node: tuple[str, Path]) -> None:
    bootstrap, base = node
    assert kmirror("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "pc",
                   "--partitions", "1").returncode == 0
    produced = kmirror("console-producer", "--bootstrap-server", bootstrap, "--topic", "pc",
                       "--property", "parse.key=true", "--property", "key.separator=:",
                       "--compression-codec", "zstd", stdin="k1:one\nk2:two\nk3:three\n")
    assert produced.returncode == 0, produced.stderr
    consumed = kmirror("console-consumer", "--bootstrap-server", bootstrap, "--topic", "pc", "--from-beginning",
                       "--max-messages", "3", "--timeout-ms", "10000",
                       "--property", "print.key=true", "--property", "print.offset=true")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == ["Offset:0\tk1\tone", "Offset:1\tk2\ttwo", "Offset:2\tk3\tthree"]
    assert "Processed a total of 3 messages" in consumed.stderr
    from_offset = kmirror("console-consumer", "--bootstrap-server", bootstrap, "--topic", "pc", "--partition", "0",
                          "--offset", "2", "--max-messages", "1", "--timeout-ms", "10000")
    assert from_offset.stdout.splitlines() == ["three"]
    segments = sorted(base.rglob("pc-0/*.log"))
    assert segments, "the node keeps the partition in Kafka's on-disk layout"
    dumped = kmirror("dump-log", "--files", str(segments[0]), "--print-data-log")
    assert dumped.returncode == 0, dumped.stderr
    assert "compresscodec: zstd" in dumped.stdout
    assert "key: k2 payload: two" in dumped.stdout


def test_unknown_topic_for_console_tools(node: tuple[str, Path]) -> None:
    bootstrap, _ = node
    produced = kmirror("console-producer", "--bootstrap-server", bootstrap, "--topic", "nope", stdin="x\n")
    assert produced.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in produced.stderr
