"""KIP-392 (seed 004): a consumer with `client.rack` is sent to an in-sync follower in its rack
and reads every record from it."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror.testing.processes import LocalCluster, free_port_block

pytestmark = pytest.mark.integration

SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"


@pytest.fixture
def racked(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(dir=tmp_path / "racked", port=free_port_block(3), nodes=3,
                      overrides={"replica.selector.class": SELECTOR}, racks=["rack-a", "rack-b", "rack-c"]) as c:
        yield c


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_consumer_fetches_from_the_follower_in_its_rack(racked):
    b = racked.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic("racked", 1, 3)])["racked"].result(30)
    producer = Producer({"bootstrap.servers": b, "acks": "all"})
    for i in range(100):
        producer.produce("racked", value=b"%d" % i, partition=0)
    assert producer.flush(30) == 0
    md = admin.list_topics("racked", timeout=10).topics["racked"].partitions[0]
    follower = next(r for r in md.replicas if r != md.leader)
    rack = ["rack-a", "rack-b", "rack-c"][follower - 1]

    collect = Collect()
    logger = logging.getLogger(f"rdkafka-{rack}")
    logger.addHandler(collect)
    logger.setLevel(logging.DEBUG)
    consumer = Consumer({"bootstrap.servers": b, "group.id": "rack-reader", "client.rack": rack,
                         "enable.auto.commit": False, "debug": "fetch", "logger": logger})
    consumer.assign([TopicPartition("racked", 0, 0)])
    values = []
    deadline = time.monotonic() + 60
    while len(values) < 100 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and not msg.error():
            values.append(int(msg.value()))
    consumer.close()
    assert values == list(range(100))
    preferred = [line for line in collect.lines if "preferred replica" in line.lower()]
    assert preferred, "the leader never named a preferred read replica"
    # librdkafka: "Topic racked [0]: migrating from broker L to F (leader is L): preferred replica updated"
    assert any(f"to {follower} (leader is {md.leader})" in line for line in preferred), preferred
