"""Cluster membership with real processes: `kmirror cluster up --nodes 3` (controller 3000 plus
three brokers), brokers listed by confluent-kafka's AdminClient, leadership moving when a
leader broker is killed, a restarted broker unfenced again, and a controller restart losing no
metadata. Default failure detection (broker.session.timeout.ms=9000)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from kmirror.runtime.local_cluster import (
    CONTROLLER_NODE_ID,
    CONTROLLER_PORT_OFFSET,
    api_versions_ok,
    pid_path,
)
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import KMIRROR, LocalCluster, free_port_block

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_S = 9


@pytest.fixture
def cluster3_default(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(dir=tmp_path / "c3", port=free_port_block(3), nodes=3) as c:
        yield c


def _wait_for(what: str, probe: Callable[[], Any], timeout_s: float) -> Any:
    """A broker being elected or restarted answers with a KafkaException meanwhile: "not yet"."""
    return wait_until(probe, what, timeout_s, retry_on=(KafkaException,))


def _partition(admin: AdminClient, topic: str) -> Any:
    md = admin.list_topics(topic, timeout=10)
    t = md.topics[topic]
    if t.error is not None:
        return None
    return t.partitions[0]


def _restart_controller(c: LocalCluster) -> None:
    node_dir = c.dir / f"node-{CONTROLLER_NODE_ID}"
    with open(node_dir / "server.log", "ab") as log:
        proc = subprocess.Popen(
            [*KMIRROR, "server", "start", "--config", str(node_dir / "server.properties")],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
    pid_path(c.dir, CONTROLLER_NODE_ID).write_text(f"{proc.pid}\n")
    _wait_for("the controller", lambda: api_versions_ok("127.0.0.1", c.port + CONTROLLER_PORT_OFFSET), 60)


def test_brokers_register_leaders_move_and_the_controller_keeps_metadata(cluster3_default: LocalCluster) -> None:
    c = cluster3_default
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    assert sorted(admin.list_topics(timeout=10).brokers) == [1, 2, 3]

    admin.create_topics([NewTopic("rf3", 1, 3, config={"retention.ms": "7200000"})])["rf3"].result(30)
    p = _wait_for("rf3 with a leader and a full ISR", lambda: (q := _partition(admin, "rf3")) and len(q.isrs) == 3 and q, 30)
    assert sorted(p.replicas) == [1, 2, 3] and p.leader in (1, 2, 3)
    old_leader, old_isr = p.leader, set(p.isrs)

    # kill -9 the leader: after the session timeout the controller fences it and elects from the ISR
    c.kill9(old_leader)
    survivor = next(b for b in (1, 2, 3) if b != old_leader)
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{c.port + survivor - 1}"})
    p = _wait_for(
        "a new leader",
        lambda: (q := _partition(admin, "rf3")) and q.leader not in (-1, old_leader) and q,
        SESSION_TIMEOUT_S + 15,
    )
    assert p.leader in old_isr and old_leader not in p.isrs
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{c.port + survivor - 1}", "acks": "1"})
    delivered: list[Any] = []
    producer.produce("rf3", b"after-failover", on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(30)
    assert delivered == [None]

    # the killed broker comes back: it registers again and is unfenced
    c.start_node(old_leader)
    _wait_for("the restarted broker listed", lambda: sorted(admin.list_topics(timeout=10).brokers) == [1, 2, 3], 30)

    # a controller restart loses no metadata: the topic and its config are still known to it
    c.kill9(CONTROLLER_NODE_ID)
    _restart_controller(c)
    fresh = AdminClient({"bootstrap.servers": c.bootstrap})
    futures = fresh.create_topics([NewTopic("rf3", 1, 3)])
    with pytest.raises(KafkaException) as exists:
        futures["rf3"].result(30)
    assert "TOPIC_ALREADY_EXISTS" in str(exists.value) or "already exists" in str(exists.value)
    res = ConfigResource(ResourceType.TOPIC, "rf3")
    assert fresh.describe_configs([res])[res].result(30)["retention.ms"].value == "7200000"
    fresh.create_topics([NewTopic("after-restart", 1, 3)])["after-restart"].result(30)
    _wait_for("the new topic on every broker", lambda: all(
        "after-restart" in AdminClient({"bootstrap.servers": f"127.0.0.1:{c.port + b - 1}"}).list_topics(timeout=10).topics
        for b in (1, 2, 3)
    ), 30)
