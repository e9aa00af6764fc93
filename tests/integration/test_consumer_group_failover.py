"""A KIP-848 consumer group survives the kill -9 of its coordinator in a 3-broker cluster:
another broker loads the group from the replicated `__consumer_offsets` partition with its
epochs (the group epoch does not restart), the members keep consuming with no partition owned
twice, and every acknowledged record is consumed and committed exactly once."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror.client.connection import BrokerConnection
from kmirror.client.errors import KafkaConnectionError
from kmirror.protocol.entities import build
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.group_consumers import PARTITIONS, Group, Load, wait_for
from kmirror.testing.processes import FAST_FAILURE_DETECTION, LocalCluster, free_port_block
from kmirror.testing.replication import request_type

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OVERRIDES = {
    **FAST_FAILURE_DETECTION,
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "5",
    "group.consumer.heartbeat.interval.ms": "1000",
}


@pytest.fixture
def cluster3(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(dir=tmp_path / "cluster3", port=free_port_block(3), nodes=3, overrides=dict(OVERRIDES)) as c:
        yield c


def describe(bootstrap_port: int, group_id: str) -> tuple[int, Any]:
    """(coordinator node id, the raw ConsumerGroupDescribe group) of `group_id`."""

    async def run() -> tuple[int, Any]:
        conn = BrokerConnection("127.0.0.1", bootstrap_port, client_id="failover-test")
        await conn.connect()
        try:
            for _ in range(150):
                found = await conn.send(build(request_type(10, 3), key=group_id, key_type=0))
                if found.error_code == ErrorCode.none:
                    break
                await asyncio.sleep(0.2)
        finally:
            await conn.close()
        coordinator = BrokerConnection(found.host, found.port, client_id="failover-test")
        await coordinator.connect()
        try:
            response = await coordinator.send(build(request_type(69, 0), group_ids=(group_id,),
                                                    include_authorized_operations=False))
        finally:
            await coordinator.close()
        return int(found.node_id), response.groups[0]

    return asyncio.run(run())


def moved_and_stable(port: int, group_id: str, dead: int) -> bool:
    """The group is coordinated by a live node and Stable (a node just killed may still be
    named by FindCoordinator until the controller fences it: its connection fails)."""
    try:
        node, described = describe(port, group_id)
    except (TimeoutError, OSError, KafkaConnectionError):
        return False
    return node != dead and described.error_code == ErrorCode.none and str(described.group_state) == "Stable"


def test_the_group_survives_its_coordinators_kill_9(cluster3: LocalCluster):
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap})
    admin.create_topics([NewTopic("payments", PARTITIONS, 3, config={"min.insync.replicas": "2"})])["payments"].result(30)
    load = Load(cluster3.bootstrap, "payments")
    group = Group(cluster3.bootstrap, "failover", "consumer", "payments")
    try:
        for name in ("c1", "c2", "c3", "extra"):
            group.add(name)
        wait_for("four members covering every partition", group.covers_all, group.no_overlap)
        group.remove("extra")  # group epoch 5: a group lost and rebuilt by rejoins would be at 3
        wait_for("three members covering every partition", group.covers_all, group.no_overlap)
        wait_for("a stable group", lambda: str(describe(cluster3.port, "failover")[1].group_state) == "Stable")
        node, before = describe(cluster3.port, "failover")
        assert before.group_epoch == 5

        cluster3.kill9(node)
        survivor_port = cluster3.port + (0 if node != 1 else 1)
        wait_for("the group reloaded by another coordinator, stable again",
                 lambda: moved_and_stable(survivor_port, "failover", node), group.no_overlap, timeout_s=120)
        _, after = describe(survivor_port, "failover")
        assert after.group_epoch == before.group_epoch
        assert sorted(m.member_id for m in after.members) == sorted(m.member_id for m in before.members)
        wait_for("three members covering every partition", group.covers_all, group.no_overlap)
    finally:
        load.stop()
    try:
        wait_for("every acknowledged record consumed",
                 lambda: len({(p, o) for _, p, o in group.consumed}) >= len(load.acked), group.no_overlap,
                 timeout_s=120)
    except AssertionError:
        missing = sorted(load.acked - {(p, o) for _, p, o in group.consumed})
        errors = [e for m in group.members.values() for e in m.errors]
        raise AssertionError(f"{len(missing)} records never counted, e.g. {missing[:10]}; errors {errors[:10]}") from None
    finally:
        for name in list(group.members):
            group.remove(name)
    counts = Counter((p, o) for _, p, o in group.consumed)
    duplicates = {k: v for k, v in counts.items() if v > 1}
    assert not duplicates, f"records consumed and committed twice: {sorted(duplicates)[:10]}; {group.errors[:5]}"
    # every acknowledged record is there; a write whose acknowledgement was lost with the killed
    # broker may be in the log too, and is consumed like any other
    assert load.acked <= set(counts)
