"""Kafka-compatible clusters that are not kmirror, as mirror sources for tests.

`MockKafkaCluster` runs librdkafka's mock cluster (inside confluent-kafka) in a child
process: a producer configured with `test.mock.num.brokers` owns the cluster, which serves
real TCP clients until the child exits. The child prints the brokers' `host:port` list on
its first line and exits when its stdin closes, so the cluster never outlives the test
process, even after a crash.

Run directly: `python -m kmirror.testing.foreign_sources --brokers 3` prints the bootstrap
servers and serves until stdin closes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from dataclasses import dataclass, field


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
