"""A log dir that fails under a running broker (KIP-858, JBOD): the broker takes that dir
offline and keeps serving its other dir; the controller, told by the broker's heartbeat, moves
the leaderships and ISR memberships of the replicas that were in the failed dir to the other
brokers, while an idempotent acks=all producer keeps writing; nothing acknowledged is lost.
kafka-python's DescribeLogDirs and `kmirror log-dirs` show the failed dir's error. Restarted
with the disk still failed, the broker starts without that dir; restarted with the disk
replaced (empty), it copies those replicas again and they rejoin their ISRs.
The failure is made as Kafka's own tests make it: the dir is replaced by a file, so the next
file the broker creates there (a segment roll) fails with ENOTDIR."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration

TOPIC = "jbod"
PARTITIONS = 6
KAFKA_STORAGE_ERROR = 56


def read_all(bootstrap: str, ends: dict[int, int]) -> dict[tuple[int, int], bytes]:
    """(partition, offset) -> value of every record below `ends`, read by a confluent-kafka consumer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "jbod-check", "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in ends])
    out: dict[tuple[int, int], bytes] = {}
    wanted = sum(ends.values())

    def more() -> bool:
        for msg in consumer.consume(1000, timeout=1):
            if msg.error() is None:
                out[(msg.partition(), msg.offset())] = msg.value()
        return len(out) >= wanted

    try:
        wait_until(more, "every record read back", timeout_s=120)
    finally:
        consumer.close()
    return out


def test_a_failed_log_dir_goes_offline_and_its_partitions_move_while_the_broker_serves_the_other(
        tmp_path: Path) -> None:
    from kafka import KafkaAdminClient

    base = tmp_path / "c"
    second = base / "node-1" / "data2"
    with LocalCluster(dir=base, port=free_port_block(3), nodes=3,
                      overrides={"log.segment.bytes": "60000", "min.insync.replicas": "2"},
                      per_broker=lambda n: {"log.dirs": f"{base / 'node-1' / 'data'},{second}"} if n == 1 else {}) as c:
        create_topic(c.bootstrap, TOPIC, partitions=PARTITIONS, replication_factor=3)
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
        acked: list[tuple[int, int, bytes]] = []
        failed: list[str] = []
        stop = threading.Event()

        def write() -> None:
            producer = Producer({"bootstrap.servers": c.bootstrap, "acks": "all", "enable.idempotence": True,
                                 "linger.ms": 5, "message.timeout.ms": 120_000})

            def delivered(err: object, msg: object) -> None:
                if err is None:
                    acked.append((msg.partition(), msg.offset(), msg.value()))  # type: ignore[attr-defined]
                else:
                    failed.append(str(err))

            n = 0
            while not stop.is_set():
                producer.produce(TOPIC, value=f"record-{n:07d}-".encode() + b"x" * 200, partition=n % PARTITIONS,
                                 on_delivery=delivered)
                n += 1
                if n % 500 == 0:
                    producer.flush(60)
            producer.flush(120)

        writer = threading.Thread(target=write)
        writer.start()
        try:
            wait_until(lambda: len(acked) >= 3000, "records acknowledged before the failure")
            in_second = sorted(int(d.name.rsplit("-", 1)[1]) for d in second.glob(f"{TOPIC}-*"))
            assert 0 < len(in_second) < PARTITIONS, in_second  # broker 1 holds replicas in both dirs

            def partitions() -> dict[int, dict[str, object]]:
                (topic,) = admin.describe_topics([TOPIC])
                return {p["partition_index"]: p for p in topic["partitions"]}

            # the controller knows which dir holds broker 1's replicas: nothing offline yet
            assert all(p["offline_replicas"] == [] and 1 in p["isr_nodes"] for p in partitions().values())
            second.rename(base / "node-1" / "failed-disk")  # in one step: the broker writes there meanwhile
            second.write_text("")  # the dir is now a file: the next file created there fails

            def moved() -> bool:
                now = partitions()
                return all(now[p]["leader_id"] != 1 and 1 not in now[p]["isr_nodes"] and now[p]["offline_replicas"] == [1]
                           for p in in_second)

            wait_until(moved, "replicas of the failed dir out of their ISRs and leaderships", timeout_s=60)
            after_failure = len(acked)
            wait_until(lambda: len(acked) >= after_failure + 2000, "records acknowledged after the failure")
        finally:
            stop.set()
            writer.join(180)

        assert not c.exited(1), "the broker halted instead of serving its other log dir"
        log = c.log_text(1)
        assert f"Stopping serving replicas in dir {second}" in log
        now = partitions()
        for p in set(range(PARTITIONS)) - set(in_second):  # the dir still online keeps its replicas in sync
            assert 1 in now[p]["isr_nodes"] and now[p]["offline_replicas"] == [], now[p]
        (broker,) = admin.describe_log_dirs(brokers=[1])
        errors = {d["log_dir"]: d["error_code"] for d in broker["log_dirs"]}
        assert errors == {str(base / "node-1" / "data"): 0, str(second): KAFKA_STORAGE_ERROR}
        out = kmirror("log-dirs", "--bootstrap-server", c.bootstrap, "--describe", "--broker-list", "1").stdout
        dirs = {d["logDir"]: d for d in json.loads(out.splitlines()[-1])["brokers"][0]["logDirs"]}
        assert dirs[str(second)] == {"partitions": [], "error": "org.apache.kafka.common.errors.KafkaStorageException",
                                     "logDir": str(second)}
        assert dirs[str(base / "node-1" / "data")]["error"] is None
        assert failed == []
        assert_every_acked_record_read_back(c.bootstrap, acked)

        # restarted with the disk still failed: broker 1 starts without that dir, its replicas
        # there stay offline, the others catch up and rejoin their ISRs
        c.kill9(1)
        c.start_node(1)
        assert f"Error while loading log dir {second}" in c.log_text(1)
        in_first = set(range(PARTITIONS)) - set(in_second)
        wait_until(lambda: all(1 in partitions()[p]["isr_nodes"] for p in in_first), "the online dir's replicas in sync")
        now = partitions()
        assert all(now[p]["offline_replicas"] == [1] and 1 not in now[p]["isr_nodes"] for p in in_second), now

        # the disk replaced (an empty dir, a new directory id): broker 1 copies those replicas
        # again from their leaders, names their new dir, and every replica is back in sync
        c.kill9(1)
        second.unlink()
        second.mkdir()
        c.start_node(1)
        wait_until(lambda: all(1 in p["isr_nodes"] and p["offline_replicas"] == [] for p in partitions().values()),
                   "every replica of broker 1 back in sync after the disk was replaced", timeout_s=60)
        (broker,) = admin.describe_log_dirs(brokers=[1])
        assert all(d["error_code"] == 0 for d in broker["log_dirs"])
        assert_every_acked_record_read_back(c.bootstrap, acked)
        admin.close()


def assert_every_acked_record_read_back(bootstrap: str, acked: list[tuple[int, int, bytes]]) -> None:
    """Every acknowledged record is there, once, at its offset."""
    ends = {p: max((o for q, o, _ in acked if q == p), default=-1) + 1 for p in range(PARTITIONS)}
    found = read_all(bootstrap, ends)
    assert len({(p, o) for p, o, _ in acked}) == len(acked)
    missing = [(p, o) for p, o, v in acked if found.get((p, o)) != v]
    assert missing == [], missing[:10]
