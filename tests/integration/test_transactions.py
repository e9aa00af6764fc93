"""Transactions end to end on a real 3-broker cluster (RF=3) with real transactional clients.

confluent-kafka's transactional API: commit and abort under both isolation levels,
consume-transform-produce with `send_offsets_to_transaction`, zombie fencing by a second
producer of one transactional.id, a producer killed inside a transaction aborted after its
`transaction.timeout.ms`. kafka-python's and aiokafka's transactional producers. Bad input
(raw requests) gets Kafka's error codes while the coordinator keeps serving others. KIP-890
part 1 (raw requests): a late transactional batch is refused, and so is a batch whose
transaction's ABORT marker lands while the leader verifies it (the verification guard).
"""

from __future__ import annotations

import asyncio
import datetime
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kmirror.client.connection import BrokerConnection
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.records.builder import build_batch
from kmirror.testing.kafka_clients import committed, watermarks
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.replication import request_type

pytestmark = pytest.mark.integration

TXN_OVERRIDES = {
    "broker.heartbeat.interval.ms": "500",
    "broker.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "5",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "5",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "transaction.max.timeout.ms": "120000",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = LocalCluster(dir=tmp_path_factory.mktemp("txn") / "cluster3", port=free_port_block(3), nodes=3,
                     overrides=dict(TXN_OVERRIDES))
    c.up()
    try:
        yield c
    finally:
        c.down()


def new_topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=3,
                                            config={"min.insync.replicas": "2"})])
    futures[name].result(timeout=30)
    return name


def txn_producer(bootstrap: str, txn_id: str, **extra: Any) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **extra})
    producer.init_transactions(60)
    return producer


def read_all(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every value a consumer of `isolation` delivers, reading each partition to its end."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4()}",
                         "isolation.level": isolation, "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{isolation} consumer did not reach the end: {values}"
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            values.append(msg.value())
        return values
    finally:
        consumer.close()


def hw(bootstrap: str, topic: str, partition: int) -> int:
    return watermarks(bootstrap, topic, partition, "read_uncommitted")[1]


def lso(bootstrap: str, topic: str, partition: int) -> int:
    return watermarks(bootstrap, topic, partition, "read_committed")[1]


def wait_until(condition: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


# ---- commit and abort ---------------------------------------------------------------------


def test_commit_and_abort_visibility_under_both_isolation_levels(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap
    topic = new_topic(bs, partitions=2)
    producer = txn_producer(bs, f"vis-{uuid.uuid4().hex[:6]}")
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, value=b"commit-%d" % i, partition=i % 2)
    producer.commit_transaction(60)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=b"abort-%d" % i, partition=i % 2)
    producer.flush(60)
    # open transaction: read_committed stops at the LSO, read_uncommitted sees everything
    assert all(lso(bs, topic, p) < hw(bs, topic, p) for p in range(2))
    producer.abort_transaction(60)
    committed_values = sorted(read_all(bs, topic, 2, "read_committed"))
    assert committed_values == sorted(b"commit-%d" % i for i in range(6))
    uncommitted = sorted(read_all(bs, topic, 2, "read_uncommitted"))
    assert uncommitted == sorted([*(b"commit-%d" % i for i in range(6)), *(b"abort-%d" % i for i in range(4))])
    # markers closed both transactions: LSO == HW on every partition
    for p in range(2):
        assert lso(bs, topic, p) == hw(bs, topic, p)


def test_consume_transform_produce_with_send_offsets_to_transaction(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap
    source, sink = new_topic(bs, partitions=2), new_topic(bs, partitions=2)
    feeder = Producer({"bootstrap.servers": bs, "enable.idempotence": True})
    for i in range(20):
        feeder.produce(source, value=b"in-%02d" % i, partition=i % 2)
    feeder.flush(30)
    group = f"ctp-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([source])
    producer = txn_producer(bs, f"ctp-{uuid.uuid4().hex[:6]}")
    seen = 0
    deadline = time.monotonic() + 90
    try:
        while seen < 20:
            assert time.monotonic() < deadline, f"consumed only {seen} of 20"
            batch = consumer.consume(10, 1.0)
            records = [m for m in batch if m.error() is None]
            if not records:
                continue
            producer.begin_transaction()
            for m in records:
                producer.produce(sink, value=m.value().replace(b"in-", b"out-"), partition=m.partition())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 60)
            producer.commit_transaction(60)
            seen += len(records)
        # an aborted round moves nothing: neither output nor offsets
        producer.begin_transaction()
        producer.produce(sink, value=b"never", partition=0)
        offsets = [TopicPartition(source, p, 0) for p in range(2)]
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 60)
        producer.abort_transaction(60)
    finally:
        consumer.close()
    assert sorted(read_all(bs, sink, 2, "read_committed")) == [b"out-%02d" % i for i in range(20)]
    assert committed(bs, group, source, 2) == {0: 10, 1: 10}


def test_zombie_is_fenced_by_a_second_producer_of_the_same_transactional_id(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap
    topic = new_topic(bs)
    txn_id = f"zombie-{uuid.uuid4().hex[:6]}"
    zombie = txn_producer(bs, txn_id)
    zombie.begin_transaction()
    for i in range(3):
        zombie.produce(topic, value=b"zombie-%d" % i)
    zombie.flush(30)
    successor = txn_producer(bs, txn_id)  # aborts the zombie's transaction, bumps the epoch
    successor.begin_transaction()
    successor.produce(topic, value=b"fresh")
    successor.commit_transaction(60)
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(30)
    error = fenced.value.args[0]
    assert error.fatal() or error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                             KafkaError.INVALID_PRODUCER_EPOCH), error
    assert read_all(bs, topic, 1, "read_committed") == [b"fresh"]
    assert sorted(read_all(bs, topic, 1, "read_uncommitted")) == sorted(
        [b"fresh", *(b"zombie-%d" % i for i in range(3))])


KILLED_PRODUCER = """
import sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2], "transaction.timeout.ms": 5000})
p.init_transactions(60)
p.begin_transaction()
for i in range(5):
    p.produce(sys.argv[3], value=b"lost-%d" % i)
p.flush(30)
print("in-transaction", flush=True)
time.sleep(600)
"""


def test_producer_killed_inside_a_transaction_is_aborted_after_its_timeout(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap
    topic = new_topic(bs)
    txn_id = f"killed-{uuid.uuid4().hex[:6]}"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_PRODUCER, bs, txn_id, topic], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "in-transaction"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert hw(bs, topic, 0) == 5 and lso(bs, topic, 0) == 0  # open, nothing stable
    wait_until(lambda: lso(bs, topic, 0) == hw(bs, topic, 0), 60,
               "the coordinator to abort the timed-out transaction")
    assert hw(bs, topic, 0) == 6  # the five records and an ABORT marker
    assert read_all(bs, topic, 1, "read_committed") == []
    # the id is usable again
    producer = txn_producer(bs, txn_id)
    producer.begin_transaction()
    producer.produce(topic, value=b"after")
    producer.commit_transaction(60)
    assert read_all(bs, topic, 1, "read_committed") == [b"after"]


# ---- other clients ------------------------------------------------------------------------


def test_kafka_python_transactional_producer(cluster: LocalCluster) -> None:
    from kafka import KafkaProducer

    topic = new_topic(cluster.bootstrap)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap.split(","),
                             transactional_id=f"kp-{uuid.uuid4().hex[:6]}")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"kafka-python-1")
        producer.send(topic, b"kafka-python-2")
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"kafka-python-aborted")
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close()
    assert read_all(cluster.bootstrap, topic, 1, "read_committed") == [b"kafka-python-1", b"kafka-python-2"]


def test_aiokafka_transactional_producer(cluster: LocalCluster) -> None:
    from aiokafka import AIOKafkaProducer

    topic = new_topic(cluster.bootstrap)

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=cluster.bootstrap, transactional_id=f"aio-{uuid.uuid4().hex[:6]}")
        await producer.start()
        try:
            async with producer.transaction():
                await producer.send_and_wait(topic, b"aiokafka-1")
                await producer.send_and_wait(topic, b"aiokafka-2")
        finally:
            await producer.stop()

    asyncio.run(run())
    assert read_all(cluster.bootstrap, topic, 1, "read_committed") == [b"aiokafka-1", b"aiokafka-2"]


# ---- bad input ----------------------------------------------------------------------------


def request(api_key: int, version: int, **fields: Any) -> Any:
    return build(request_type(api_key, version), **fields)


async def coordinator_connection(cluster: LocalCluster, txn_id: str) -> BrokerConnection:
    conn = BrokerConnection("127.0.0.1", cluster.port, client_id="txn-bad-input")
    await conn.connect()
    try:
        for _ in range(100):
            found = await conn.send(request(10, 3, key=txn_id, key_type=1))
            if found.error_code == ErrorCode.none:
                break
            await asyncio.sleep(0.2)
        assert found.error_code == ErrorCode.none, found
    finally:
        await conn.close()
    coordinator = BrokerConnection(found.host, found.port, client_id="txn-bad-input")
    await coordinator.connect()
    return coordinator


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
    wait_until(lambda: lso(bs, topic, 0) == hw(bs, topic, 0) == 2, 30, "the abort marker, then LSO == HW")
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
    wait_until(lambda: admin.list_topics(name, timeout=30).topics[name].partitions[0].leader > 0, 30,
               "a leader")
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
    wait_until(lambda: lso(bs, name, 0) == hw(bs, name, 0) == 4, 30, "two more markers, then LSO == HW")
    assert read_all(bs, name, 1, "read_committed") == [b"next-transaction"]


# ---- kmirror transactions (kafka-transactions.sh) -----------------------------------------


def test_cli_lists_and_describes_transactions(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap
    topic = new_topic(bs, partitions=2)
    txn_id = f"cli-{uuid.uuid4().hex[:6]}"
    producer = txn_producer(bs, txn_id)
    producer.begin_transaction()
    producer.produce(topic, value=b"x", partition=1)
    producer.flush(30)
    listed = kmirror("transactions", "--bootstrap-server", bs, "--list", "--state", "Ongoing").stdout
    rows = [line.split() for line in listed.splitlines()]
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert any(r[0] == txn_id and r[3] == "Ongoing" for r in rows[1:]), listed
    described = kmirror("transactions", "--bootstrap-server", bs, "--describe", "--transactional-id", txn_id).stdout
    header, values = (line.split() for line in described.splitlines())
    fields = dict(zip(header, values, strict=True))
    assert (fields["TransactionState"], fields["TopicPartitions"]) == ("Ongoing", f"{topic}-1"), described
    producer.commit_transaction(60)

    def complete() -> bool:
        out = kmirror("transactions", "--bootstrap-server", bs, "--describe", "--transactional-id", txn_id).stdout
        return "CompleteCommit" in out

    wait_until(complete, 30, "CompleteCommit")
    unknown = kmirror("transactions", "--bootstrap-server", bs, "--describe", "--transactional-id", "nobody",
                      check=False)
    assert unknown.returncode != 0 and "TRANSACTIONAL_ID_NOT_FOUND" in unknown.stderr


# ---- group coordinator failover with offsets pending in a transaction -------------------


def test_group_coordinator_killed_with_offsets_pending_in_a_transaction(cluster: LocalCluster) -> None:
    """kill -9 of the group coordinator between `send_offsets_to_transaction` and the commit,
    the broker coordinating the transaction as well: the next group coordinator loads the
    pending offsets from `__consumer_offsets` and the commit marker commits them (they were
    written as the producer's transactional batch, and acknowledged only once the ISR had it)."""
    bs = cluster.bootstrap
    source, sink = new_topic(bs), new_topic(bs)
    feeder = Producer({"bootstrap.servers": bs, "enable.idempotence": True})
    for i in range(10):
        feeder.produce(source, value=b"in-%d" % i, partition=0)
    feeder.flush(30)
    group = f"gfo-{uuid.uuid4().hex[:6]}"
    consumer = Consumer({"bootstrap.servers": bs, "group.id": group, "isolation.level": "read_committed",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe([source])
    records: list[Any] = []
    deadline = time.monotonic() + 60
    while len(records) < 10:
        assert time.monotonic() < deadline, f"consumed {len(records)} of 10"
        records += [m for m in consumer.consume(10, 1.0) if m.error() is None]

    async def coordinators() -> tuple[int, str]:
        """The group's coordinator, and a transactional id that broker coordinates as well
        (the harder case: both coordinators fail over together)."""
        conn = BrokerConnection("127.0.0.1", cluster.port, client_id="txn-group-failover")
        await conn.connect()
        try:
            found = await conn.send(request(10, 3, key=group, key_type=0))
            assert found.error_code == ErrorCode.none, found
            for _ in range(200):
                txn_id = f"gfo-{uuid.uuid4().hex[:6]}"
                txn = await conn.send(request(10, 3, key=txn_id, key_type=1))
                if txn.error_code == ErrorCode.none and txn.node_id == found.node_id:
                    return int(found.node_id), txn_id
                await asyncio.sleep(0.05)
            raise AssertionError("no transactional id coordinated by the group's coordinator")
        finally:
            await conn.close()

    victim, txn_id = asyncio.run(coordinators())
    producer = txn_producer(bs, txn_id)
    producer.begin_transaction()
    for m in records:
        producer.produce(sink, value=m.value().replace(b"in-", b"out-"), partition=0)
    producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                         consumer.consumer_group_metadata(), 60)
    cluster.kill9(victim)
    try:
        producer.commit_transaction(120)
        survivors = ",".join(f"127.0.0.1:{cluster.port + n - 1}" for n in (1, 2, 3) if n != victim)

        def offsets_committed() -> bool:
            try:
                return committed(survivors, group, source, 1) == {0: 10}
            except KafkaException:  # the group's coordinator is still moving
                return False

        wait_until(offsets_committed, 90, "the transaction's offsets")
        assert sorted(read_all(survivors, sink, 1, "read_committed")) == sorted(b"out-%d" % i for i in range(10))
    finally:
        cluster.start_node(victim)
        consumer.close()


# ---- coordinator failover (runs last: it kills a broker of the module's cluster) ----------


def describe_state(port: int, txn_id: str) -> str:
    async def run() -> str:
        conn = BrokerConnection("127.0.0.1", port, client_id="txn-failover-probe")
        await conn.connect()
        try:
            response = await conn.send(request(65, 0, transactional_ids=(txn_id,)))
            return str(response.transaction_states[0].transaction_state)
        finally:
            await conn.close()

    return asyncio.run(run())


def test_zz_coordinator_killed_mid_end_txn_leaves_the_transaction_whole(cluster: LocalCluster) -> None:
    """kill -9 of the coordinator after PrepareCommit is persisted and before its markers are
    written: the data topic needs all 3 replicas in its ISR (`min.insync.replicas=3`) and one
    data leader is stopped, so no marker can be written while it is. The next coordinator loads
    PrepareCommit and finishes once the brokers are back; read_committed then sees the whole
    transaction on every partition."""
    bs = cluster.bootstrap
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3,
                                  config={"min.insync.replicas": "3"})])[topic].result(timeout=30)
    txn_id = f"failover-{uuid.uuid4().hex[:6]}"

    async def find() -> int:
        conn = await coordinator_connection(cluster, txn_id)
        port = conn.port
        await conn.close()
        return port

    producer = txn_producer(bs, txn_id, **{"transaction.timeout.ms": 120000})
    coordinator_port = asyncio.run(find())
    coordinator = coordinator_port - cluster.port + 1
    leaders = {p.id: p.leader for p in admin.list_topics(topic, timeout=30).topics[topic].partitions.values()}
    stopped = next(leader for leader in leaders.values() if leader != coordinator)
    producer.begin_transaction()
    for i in range(15):
        producer.produce(topic, value=b"whole-%02d" % i, partition=i % 3)
    producer.flush(30)

    outcome: dict[str, Any] = {}

    def commit() -> None:
        try:
            producer.commit_transaction(240)
            outcome["committed"] = True
        except KafkaException as exc:
            outcome["error"] = exc

    cluster.pause(stopped)
    committer = threading.Thread(target=commit, daemon=True)
    try:
        committer.start()
        seen: list[str] = []

        def prepared() -> bool:
            seen.append(describe_state(coordinator_port, txn_id))
            if len(seen) == 1 or seen[-1] != seen[-2]:
                print(f"coordinator {coordinator}: {seen[-1]} (stopped leader {stopped}, outcome {outcome})")
            return seen[-1] == "PrepareCommit"

        wait_until(prepared, 60, "PrepareCommit")
        time.sleep(1)
        assert describe_state(coordinator_port, txn_id) == "PrepareCommit"  # markers cannot be written
        cluster.kill9(coordinator)
    finally:
        cluster.resume(stopped)
    cluster.start_node(coordinator)
    committer.join(250)

    def committed_everywhere() -> bool:
        # five records and the COMMIT marker. A partition may hold the marker twice: one the
        # killed coordinator had appended but not seen acknowledged is written again by the
        # next (as Kafka's coordinator re-sends every marker of a loaded PrepareCommit).
        try:
            return all(lso(bs, topic, p) == hw(bs, topic, p) >= 6 for p in range(3))
        except KafkaException:  # leadership still moving after the kill
            return False

    wait_until(committed_everywhere, 120, "every partition's marker, LSO == HW")
    assert sorted(read_all(bs, topic, 3, "read_committed")) == [b"whole-%02d" % i for i in range(15)]
    assert outcome.get("committed") or outcome.get("error") is not None
