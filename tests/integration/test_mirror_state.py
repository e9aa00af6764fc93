"""Mirror partition states persist in `__mirror_state`: written through WriteMirrorStates,
read back with ReadMirrorStates after the broker is killed and restarted (the coordinator
partition is reloaded from its log when the broker leads it again)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kmirror.client.connection import BrokerConnection
from kmirror.kip1279.state import MirrorPartitionState as S
from kmirror.protocol.mirror import read_mirror_states as rms
from kmirror.protocol.mirror import write_mirror_states as wms
from kmirror.protocol.mirror.find_coordinator import MIRROR_COORDINATOR_TYPE, MirrorCoordinatorKey
from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.processes import kmirror

DEADLINE_S = 60


async def rpc(port: int, build: Any) -> Any:
    conn = BrokerConnection("127.0.0.1", port, client_id="mirror-state-test")
    await conn.connect()
    try:
        return await conn.send(build(conn))
    finally:
        await conn.close()


def until(port: int, build: Any, ok: Any) -> Any:
    """Send until `ok(response)` (the coordinator may be electing or loading)."""
    deadline = time.monotonic() + DEADLINE_S
    while True:
        response = asyncio.run(rpc(port, build))
        if ok(response) or time.monotonic() > deadline:
            return response
        time.sleep(0.2)


def topic_id(port: int, name: str) -> Any:
    response = asyncio.run(rpc(port, lambda c: c.build_request(3, topics=None, allow_auto_topic_creation=False,
                                                                      include_topic_authorized_operations=False)))
    return next(t.topic_id for t in response.topics if t.name == name)


def test_mirror_state_survives_a_broker_restart(cluster) -> None:
    port = cluster.port
    kmirror("features", "--bootstrap-server", cluster.bootstrap, "upgrade", "--feature", "mirror.version=1")
    create_topic(cluster.bootstrap, "orders", partitions=2)
    key = str(MirrorCoordinatorKey("m1", topic_id(port, "orders"), 1))
    found = until(port, lambda c: c.build_request(10, key_type=MIRROR_COORDINATOR_TYPE, coordinator_keys=(key,)),
                  lambda r: r.coordinators[0].error_code == 0)
    assert (found.coordinators[0].error_code, found.coordinators[0].node_id) == (0, 1)

    write = wms.WriteMirrorStatesRequest(mirror_name="m1", topics=(wms.TopicData(name="orders", partitions=(
        wms.PartitionData(partition_index=1, state=int(S.PREPARING), last_mirror_epoch=4),)),))
    written = until(port, lambda c: write, lambda r: r.topics and r.topics[0].partitions[0].error_code == 0)
    assert written.topics[0].partitions[0].error_code == 0

    read = rms.ReadMirrorStatesRequest(mirror_name="m1", topics=(rms.TopicData(name="orders", partitions=(
        rms.PartitionData(partition_index=1), rms.PartitionData(partition_index=0))),))

    def settled(r: Any) -> bool:
        return bool(r.topics) and all(p.error_code == 0 for p in r.topics[0].partitions)

    cluster.kill9()
    cluster.up()
    after = until(port, lambda c: read, settled)
    assert [(p.partition_index, p.state, p.last_mirror_epoch, p.error_code) for p in after.topics[0].partitions] == [
        (1, int(S.PREPARING), 4, 0), (0, int(S.UNKNOWN), -1, 0)]
