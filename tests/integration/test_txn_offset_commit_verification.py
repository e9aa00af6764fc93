"""KIP-890 part 1 for TxnOffsetCommit on a real node: the group coordinator verifies with the
transaction coordinator that the group's `__consumer_offsets` partition is in the producer's
ongoing transaction before it writes the commit.

Raw requests: a commit whose transaction never added the group's offsets (no AddOffsetsToTxn),
and a late one after its transaction aborted, are refused with INVALID_TXN_STATE. Neither
opens a transaction on `__consumer_offsets`: its LSO stays at its HW, and a read_committed
consumer of the same group (OffsetFetch `require_stable`) still commits and fetches. Then
confluent-kafka's `send_offsets_to_transaction` commits the group's offsets as before.
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kmirror.client.connection import BrokerConnection
from kmirror.coordinator.offsets.partitioner import partition_for
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.kafka_clients import committed, create_topic, watermarks
from kmirror.testing.processes import LocalCluster, free_port_block
from kmirror.testing.replication import request_type

pytestmark = pytest.mark.integration

OFFSETS_PARTITIONS = 3


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(dir=tmp_path_factory.mktemp("txn-offsets"), port=free_port_block(), overrides={
         "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS), "transaction.state.log.num.partitions": "3"}) as c:
        yield c


def request(api_key: int, version: int, **fields: Any) -> Any:
    return build(request_type(api_key, version), **fields)


def stable_and_high(bootstrap: str, partition: int) -> tuple[int, int]:
    """(LSO, HW) of `__consumer_offsets-<partition>` (ListOffsets READ_COMMITTED / READ_UNCOMMITTED)."""
    return (watermarks(bootstrap, "__consumer_offsets", partition, "read_committed")[1],
            watermarks(bootstrap, "__consumer_offsets", partition, "read_uncommitted")[1])


async def coordinators_ready(conn: BrokerConnection, txn_id: str, group: str) -> None:
    """FindCoordinator for the transactional id and the group, until both are served (the
    internal topics are created on first use)."""
    for key, key_type in ((txn_id, 1), (group, 0)):
        for _ in range(150):
            found = await conn.send(request(10, 3, key=key, key_type=key_type))
            if found.error_code == ErrorCode.none:
                break
            await asyncio.sleep(0.2)
        assert found.error_code == ErrorCode.none, found


def test_txn_offset_commit_outside_the_transaction_is_refused_and_the_offsets_lso_never_stalls(
        node: LocalCluster) -> None:
    bs = node.bootstrap
    topic = f"t-{uuid.uuid4().hex[:8]}"
    create_topic(bs, topic)
    group = f"g-{uuid.uuid4().hex[:6]}"
    txn_id = f"raw-{uuid.uuid4().hex[:6]}"
    offsets_partition = partition_for(group, OFFSETS_PARTITIONS)

    async def run() -> list[int]:
        conn = BrokerConnection("127.0.0.1", node.port, client_id="txn-offset-verification")
        await conn.connect()
        try:
            await coordinators_ready(conn, txn_id, group)
            init = await conn.send(request(22, 4, transactional_id=txn_id,
                                           transaction_timeout=datetime.timedelta(seconds=60),
                                           producer_id=-1, producer_epoch=-1))
            assert init.error_code == ErrorCode.none
            ids = {"transactional_id": txn_id, "producer_id": init.producer_id, "producer_epoch": init.producer_epoch}

            async def txn_offset_commit(offset: int) -> int:
                R = request_type(28, 3)
                response = await conn.send(build(
                    R, **ids, group_id=group, generation_id=-1, member_id="", group_instance_id=None,
                    topics=(nested(R, "TxnOffsetCommitRequestTopic")(name=topic, partitions=(
                        nested(R, "TxnOffsetCommitRequestPartition")(
                            partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                            committed_metadata=""),)),)))
                return int(response.topics[0].partitions[0].error_code)

            # an ongoing transaction holding the topic's partition but not the group's offsets
            T = request_type(24, 3)
            added = await conn.send(build(
                T, v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=init.producer_id,
                v3_and_below_producer_epoch=init.producer_epoch,
                v3_and_below_topics=(nested(T, "AddPartitionsToTxnTopic")(name=topic, partitions=(0,)),)))
            assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
            codes = [await txn_offset_commit(5)]
            # AddOffsetsToTxn, then the transaction aborts: a late retry of its commit
            add_offsets = await conn.send(request(25, 3, **ids, group_id=group))
            assert add_offsets.error_code == ErrorCode.none
            ended = await conn.send(request(26, 3, **ids, committed=False))
            assert ended.error_code == ErrorCode.none
            for _ in range(300):  # the ABORT markers are written once the state is CompleteAbort
                described = await conn.send(request(65, 0, transactional_ids=(txn_id,)))
                if described.transaction_states[0].transaction_state == "CompleteAbort":
                    break
                await asyncio.sleep(0.1)
            assert described.transaction_states[0].transaction_state == "CompleteAbort"
            codes.append(await txn_offset_commit(6))
            return codes
        finally:
            await conn.close()

    assert asyncio.run(run()) == [ErrorCode.invalid_txn_state, ErrorCode.invalid_txn_state]
    # the group's offsets partition holds the ABORT marker only: nothing holds its LSO back
    assert stable_and_high(bs, offsets_partition) == (1, 1)
    for p in range(OFFSETS_PARTITIONS):
        lso, hw = stable_and_high(bs, p)
        assert lso == hw, f"__consumer_offsets-{p}: LSO {lso} behind HW {hw}"

    # a read_committed consumer of the group commits and fetches (OffsetFetch require_stable)
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
        [fetched] = consumer.committed([TopicPartition(topic, 0)], timeout=30)
        assert fetched.offset == 3 and fetched.error is None
    finally:
        consumer.close()

    # the transactional API's offsets, verified and committed as before
    producer = Producer({"bootstrap.servers": bs, "transactional.id": f"ok-{uuid.uuid4().hex[:6]}", "linger.ms": 5})
    producer.init_transactions(60)
    metadata_source = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    try:
        producer.begin_transaction()
        producer.produce(topic, value=b"with-offsets")
        producer.send_offsets_to_transaction([TopicPartition(topic, 0, 9)],
                                             metadata_source.consumer_group_metadata(), 60)
        producer.commit_transaction(60)
    finally:
        metadata_source.close()
    deadline = time.monotonic() + 30
    while committed(bs, group, topic, 1) != {0: 9}:  # the COMMIT marker reaches the group's partition
        assert time.monotonic() < deadline, committed(bs, group, topic, 1)
        time.sleep(0.2)
    lso, hw = stable_and_high(bs, offsets_partition)
    assert lso == hw
