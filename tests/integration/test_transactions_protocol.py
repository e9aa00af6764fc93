"""Transactions at the protocol level on a real 3-broker cluster (RF=3), through raw
requests: bad input gets Kafka's error codes while the coordinator keeps serving others;
KIP-890 part 1: a late transactional batch is refused, and so is a batch whose
transaction's ABORT marker lands while the leader verifies it (the verification guard).
"""

from __future__ import annotations

import asyncio
import datetime
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror.client.connection import BrokerConnection
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.records.builder import build_batch
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster
from kmirror.testing.replication import request_type
from kmirror.testing.transactional_clients import (
    coordinator_connection,
    hw,
    lso,
    new_topic,
    read_all,
    request,
    transactional_cluster,
    txn_producer,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with transactional_cluster(tmp_path_factory.mktemp("txn") / "cluster3") as c:
        yield c


# ---- bad input ----------------------------------------------------------------------------


def test_bad_input_gets_kafkas_error_codes_and_the_coordinator_serves_others(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap
    topic = new_topic(bs)
    txn_id = f"bad-{uuid.uuid4().hex[:6]}"

    async def run() -> dict[str, int]:
        conn = await coordinator_connection(cluster, txn_id)
        try:
            codes: dict[str, int] = {}
            end = await conn.send(request(26, 3, transactional_id=txn_id, producer_id=4242, producer_epoch=0,
                                          committed=True))
            codes["end_txn_unknown_id"] = end.error_code
            init = await conn.send(request(22, 4, transactional_id=txn_id,
                                           transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
                                           producer_epoch=-1))
            assert init.error_code == ErrorCode.none
            wrong = await conn.send(request(26, 3, transactional_id=txn_id, producer_id=init.producer_id,
                                            producer_epoch=init.producer_epoch + 3, committed=True))
            codes["end_txn_wrong_epoch"] = wrong.error_code
            old = await conn.send(request(26, 1, transactional_id=txn_id, producer_id=init.producer_id,
                                          producer_epoch=init.producer_epoch + 3, committed=True))
            codes["end_txn_wrong_epoch_v1"] = old.error_code
            T = request_type(24, 3)
            Topic = nested(T, "AddPartitionsToTxnTopic")
            add = await conn.send(build(T, v3_and_below_transactional_id=txn_id,
                                        v3_and_below_producer_id=init.producer_id,
                                        v3_and_below_producer_epoch=init.producer_epoch,
                                        v3_and_below_topics=(Topic(name="no-such-topic", partitions=(0,)),
                                                             Topic(name=topic, partitions=(0,)))))
            by_topic = {t.name: t.results_by_partition[0].partition_error_code
                        for t in add.results_by_topic_v3_and_below}
            codes["add_missing_topic"] = by_topic["no-such-topic"]
            codes["add_beside_a_missing_topic"] = by_topic[topic]
            timeout = await conn.send(request(22, 4, transactional_id=txn_id,
                                              transaction_timeout=datetime.timedelta(hours=1), producer_id=-1,
                                              producer_epoch=-1))
            codes["timeout_over_max"] = timeout.error_code
            long_id = await conn.send(request(22, 4, transactional_id="x" * 40_000,
                                              transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1,
                                              producer_epoch=-1))
            codes["over_long_id"] = long_id.error_code
            return codes
        finally:
            await conn.close()

    codes = asyncio.run(run())
    assert codes == {
        "end_txn_unknown_id": ErrorCode.invalid_producer_id_mapping,
        "end_txn_wrong_epoch": ErrorCode.producer_fenced,
        "end_txn_wrong_epoch_v1": ErrorCode.invalid_producer_epoch,
        "add_missing_topic": ErrorCode.unknown_topic_or_partition,
        "add_beside_a_missing_topic": ErrorCode.operation_not_attempted,
        "timeout_over_max": ErrorCode.invalid_transaction_timeout,
        "over_long_id": ErrorCode.invalid_request,
    }
    producer = txn_producer(bs, txn_id)  # the same id still works, and so does everyone else
    producer.begin_transaction()
    producer.produce(topic, value=b"still-served")
    producer.commit_transaction(60)
    assert read_all(bs, topic, 1, "read_committed") == [b"still-served"]


# ---- KIP-890 part 1: the partition leader verifies a producer's first transactional batch --


def test_late_transactional_batch_is_refused_and_cannot_hang_the_partition(cluster: LocalCluster) -> None:
    """A transactional batch for a partition not in the producer's ongoing transaction (never
    added, or its transaction already aborted: a late retry) is refused by the leader, so the
    LSO never stalls behind a transaction no marker will end."""
    bs = cluster.bootstrap
    topic = new_topic(bs)
    txn_id = f"late-{uuid.uuid4().hex[:6]}"
    leader = AdminClient({"bootstrap.servers": bs}).list_topics(topic, timeout=30).topics[topic].partitions[0].leader

    def batch(producer_id: int, epoch: int, sequence: int, value: bytes) -> bytes:
        return build_batch([(None, value, (), int(time.time() * 1000))], producer_id=producer_id,
                           producer_epoch=epoch, base_sequence=sequence, is_transactional=True)

    async def run() -> list[int]:
        coordinator = await coordinator_connection(cluster, txn_id)
        partition_leader = BrokerConnection("127.0.0.1", cluster.port + leader - 1, client_id="txn-late-batch")
        await partition_leader.connect()
        P = request_type(0, 9)

        async def produce(records: bytes, transactional_id: str | None = txn_id) -> int:
            response = await partition_leader.send(build(
                P, transactional_id=transactional_id, acks=-1, timeout=datetime.timedelta(seconds=30),
                topic_data=(nested(P, "TopicProduceData")(name=topic, partition_data=(
                    nested(P, "PartitionProduceData")(index=0, records=records),)),)))
            return int(response.responses[0].partition_responses[0].error_code)

        try:
            init = await coordinator.send(request(22, 4, transactional_id=txn_id,
                                                  transaction_timeout=datetime.timedelta(seconds=60),
                                                  producer_id=-1, producer_epoch=-1))
            pid, epoch = init.producer_id, init.producer_epoch
            codes = [await produce(batch(pid, epoch, 0, b"no-transactional-id"), transactional_id=None),
                     await produce(batch(pid, epoch, 0, b"never-added"))]
            T = request_type(24, 3)
            added = await coordinator.send(build(
                T, v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=(nested(T, "AddPartitionsToTxnTopic")(name=topic, partitions=(0,)),)))
            assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
            codes.append(await produce(batch(pid, epoch, 0, b"in-transaction")))
            ended = await coordinator.send(request(26, 3, transactional_id=txn_id, producer_id=pid,
                                                   producer_epoch=epoch, committed=False))
            assert ended.error_code == ErrorCode.none
            for _ in range(300):  # the ABORT marker is on the partition once the state is CompleteAbort
                described = await coordinator.send(request(65, 0, transactional_ids=(txn_id,)))
                if described.transaction_states[0].transaction_state == "CompleteAbort":
                    break
                await asyncio.sleep(0.1)
            return [*codes, await produce(batch(pid, epoch, 1, b"late-retry"))]
        finally:
            await partition_leader.close()
            await coordinator.close()

    codes = asyncio.run(run())
    assert codes == [ErrorCode.transactional_id_authorization_failed, ErrorCode.invalid_txn_state, ErrorCode.none,
                     ErrorCode.invalid_txn_state]
    wait_until(lambda: lso(bs, topic, 0) == hw(bs, topic, 0) == 2, "the abort marker, then LSO == HW", timeout_s=30)
    assert read_all(bs, topic, 1, "read_uncommitted") == [b"in-transaction"]


def test_abort_marker_landing_while_a_batch_is_verified_refuses_the_batch(cluster: LocalCluster) -> None:
    """KIP-890 part 1's verification guard on real brokers. The partition leader L asks the
    coordinator C (another broker) about a producer's first transactional batch; the ABORT
    marker of that transaction reaches L while the answer is on its way. The answer is stale
    ("in the transaction"), and the batch must not open a transaction after its own marker.
    The race is made deterministic: C is paused (SIGSTOP) so its answer waits, and the marker
    C would have sent is written to L with WriteTxnMarkers by the test meanwhile."""
    bs = cluster.bootstrap
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=1)])[name].result(timeout=30)
    wait_until(lambda: admin.list_topics(name, timeout=30).topics[name].partitions[0].leader > 0, "a leader",
               timeout_s=30)
    leader = admin.list_topics(name, timeout=30).topics[name].partitions[0].leader

    def batch(producer_id: int, epoch: int, sequence: int, value: bytes) -> bytes:
        return build_batch([(None, value, (), int(time.time() * 1000))], producer_id=producer_id,
                           producer_epoch=epoch, base_sequence=sequence, is_transactional=True)

    async def run() -> tuple[int, tuple[int, int], int]:
        for i in range(100):  # a transactional id coordinated by a broker other than the leader
            txn_id = f"guard-{uuid.uuid4().hex[:6]}-{i}"
            coordinator = await coordinator_connection(cluster, txn_id)
            coordinator_node = coordinator.port - cluster.port + 1
            if coordinator_node != leader:
                break
            await coordinator.close()
        assert coordinator_node != leader
        partition_leader = BrokerConnection("127.0.0.1", cluster.port + leader - 1, client_id="txn-guard")
        await partition_leader.connect()
        P, A, W = request_type(0, 9), request_type(24, 3), request_type(27, 1)

        async def produce(records: bytes) -> int:
            response = await partition_leader.send(build(
                P, transactional_id=txn_id, acks=-1, timeout=datetime.timedelta(seconds=30),
                topic_data=(nested(P, "TopicProduceData")(name=name, partition_data=(
                    nested(P, "PartitionProduceData")(index=0, records=records),)),)))
            return int(response.responses[0].partition_responses[0].error_code)

        async def add_partition(pid: int, epoch: int) -> None:
            added = await coordinator.send(build(
                A, v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
                v3_and_below_producer_epoch=epoch,
                v3_and_below_topics=(nested(A, "AddPartitionsToTxnTopic")(name=name, partitions=(0,)),)))
            assert added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0

        async def end(pid: int, epoch: int, committed: bool) -> None:
            ended = await coordinator.send(request(26, 3, transactional_id=txn_id, producer_id=pid,
                                                   producer_epoch=epoch, committed=committed))
            assert ended.error_code == ErrorCode.none
            want = "CompleteCommit" if committed else "CompleteAbort"
            for _ in range(300):  # every marker is written once the state is Complete*
                described = await coordinator.send(request(65, 0, transactional_ids=(txn_id,)))
                if described.transaction_states[0].transaction_state == want:
                    return
                await asyncio.sleep(0.1)
            raise AssertionError(f"{txn_id} never reached {want}")

        try:
            init = await coordinator.send(request(22, 4, transactional_id=txn_id,
                                                  transaction_timeout=datetime.timedelta(seconds=60),
                                                  producer_id=-1, producer_epoch=-1))
            pid, epoch = init.producer_id, init.producer_epoch
            await add_partition(pid, epoch)
            cluster.pause(coordinator_node)
            try:
                verified = asyncio.ensure_future(produce(batch(pid, epoch, 0, b"verified-before-its-abort")))
                await asyncio.sleep(0.5)  # L has taken the guard and waits for C's answer
                assert not verified.done()
                # another connection: a broker answers one connection's requests in order
                marker_sender = BrokerConnection("127.0.0.1", cluster.port + leader - 1, client_id="txn-guard-c")
                await marker_sender.connect()
                try:
                    marker = await marker_sender.send(build(W, markers=(nested(W, "WritableTxnMarker")(
                        producer_id=pid, producer_epoch=epoch, transaction_result=False, coordinator_epoch=0,
                        topics=(nested(W, "WritableTxnMarkerTopic")(name=name, partition_indexes=(0,)),)),)))
                finally:
                    await marker_sender.close()
                assert marker.markers[0].topics[0].partitions[0].error_code == ErrorCode.none
            finally:
                cluster.resume(coordinator_node)
            async with asyncio.timeout(30):
                code = await verified
            offsets = (hw(bs, name, 0), lso(bs, name, 0))  # right after the refusal
            await end(pid, epoch, committed=False)  # C's own ABORT marker follows
            await add_partition(pid, epoch)  # the producer goes on with a new transaction
            next_code = await produce(batch(pid, epoch, 0, b"next-transaction"))
            await end(pid, epoch, committed=True)
            return code, offsets, next_code
        finally:
            await partition_leader.close()
            await coordinator.close()

    code, (high_watermark, last_stable), next_code = asyncio.run(run())
    assert code == ErrorCode.invalid_txn_state
    assert high_watermark == last_stable == 1  # the marker alone: nothing holds the LSO back
    assert next_code == ErrorCode.none
    wait_until(lambda: lso(bs, name, 0) == hw(bs, name, 0) == 4, "two more markers, then LSO == HW", timeout_s=30)
    assert read_all(bs, name, 1, "read_committed") == [b"next-transaction"]
