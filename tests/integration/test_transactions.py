"""Transactions end to end on a real 3-broker cluster (RF=3) with real transactional clients.

confluent-kafka's transactional API: commit and abort under both isolation levels,
consume-transform-produce with `send_offsets_to_transaction`, zombie fencing by a second
producer of one transactional.id, a producer killed inside a transaction aborted after its
`transaction.timeout.ms`. kafka-python's and aiokafka's transactional producers. `kmirror
transactions`. A group coordinator and a transaction coordinator killed mid-transaction.
The raw-request cases are in test_transactions_protocol.py.
"""

from __future__ import annotations

import asyncio
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
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.kafka_clients import committed
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster, kmirror
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
    wait_until(lambda: lso(bs, topic, 0) == hw(bs, topic, 0), "the coordinator to abort the timed-out transaction",
               timeout_s=60)
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


# ---- kmirror transactions (kafka-transactions.sh) -----------------------------------------


def test_cli_lists_and_describes_transactions(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap
    topic = new_topic(bs, partitions=2)
    txn_id = f"cli-{uuid.uuid4().hex[:6]}"
    producer = txn_producer(bs, txn_id)
    producer.begin_transaction()
    producer.produce(topic, value=b"x", partition=1)
    producer.flush(30)
    listed = kmirror("transactions", "--bootstrap-server", bs, "list", "--state", "Ongoing").stdout
    rows = [line.split() for line in listed.splitlines()]
    assert rows[0] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert any(r[0] == txn_id and r[3] == "Ongoing" for r in rows[1:]), listed
    # ListTransactions v2 (KIP-1152): the ids a regular expression matches whole
    other = f"{txn_id}-other"
    txn_producer(bs, other)
    by_pattern = kmirror("transactions", "--bootstrap-server", bs, "--list",
                         "--transactional-id-pattern", f"{txn_id}|nomatch.*").stdout
    assert [line.split()[0] for line in by_pattern.splitlines()[1:]] == [txn_id], by_pattern
    by_prefix = kmirror("transactions", "--bootstrap-server", bs, "--list", "--transactional-id-pattern", "cli-.*").stdout
    assert {txn_id, other} <= {line.split()[0] for line in by_prefix.splitlines()[1:]}, by_prefix
    bad = kmirror("transactions", "--bootstrap-server", bs, "--list", "--transactional-id-pattern", "(", check=False)
    assert bad.returncode != 0 and "INVALID_REGULAR_EXPRESSION" in bad.stderr, bad.stderr
    described = kmirror("transactions", "--bootstrap-server", bs, "--describe", "--transactional-id", txn_id).stdout
    header, values = (line.split() for line in described.splitlines())
    fields = dict(zip(header, values, strict=True))
    assert (fields["TransactionState"], fields["TopicPartitions"]) == ("Ongoing", f"{topic}-1"), described
    producer.commit_transaction(60)

    def complete() -> bool:
        out = kmirror("transactions", "--bootstrap-server", bs, "--describe", "--transactional-id", txn_id).stdout
        return "CompleteCommit" in out

    wait_until(complete, "CompleteCommit", timeout_s=30)
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

        wait_until(offsets_committed, "the transaction's offsets", timeout_s=90)
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

        wait_until(prepared, "PrepareCommit", timeout_s=60)
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

    wait_until(committed_everywhere, "every partition's marker, LSO == HW", timeout_s=120)
    assert sorted(read_all(bs, topic, 3, "read_committed")) == [b"whole-%02d" % i for i in range(15)]
    assert outcome.get("committed") or outcome.get("error") is not None
