"""A streaming query over a 3-broker kmirror cluster (RF=3) while a partition leader is
killed with SIGKILL, and reads and writes with executors in separate JVMs and Python
workers (`local-cluster[2,1,1024]`).

Proven: a batch write through the idempotent sink goes on across a leader's kill -9 with
every record written exactly once; the query goes on across the leader change (its tasks and planner follow the new
leader); every record a producer had acknowledged is in the output exactly once, at one
offset; with separate executor processes a batch read and a sink write give the same
records as in local mode."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from kmirror.testing.kafka_clients import create_topic, end_offsets
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.spark import SKIP_REASON, java_available, spark_session

pytestmark = [pytest.mark.integration, pytest.mark.skipif(not java_available(), reason=SKIP_REASON)]

TOPIC = "ha"


def leader_of(bootstrap: str, topic: str, partition: int) -> int:
    return int(AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
               .topics[topic].partitions[partition].leader)


class AckedProducer(threading.Thread):
    """Produces `n` records (value = its number), paced, remembering which were acknowledged."""

    def __init__(self, bootstrap: str, n: int) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 120_000})
        self.n = n
        self.acked: set[int] = set()
        self.failed: list[str] = []
        self.sent = 0

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None:
            self.acked.add(int(msg.value()))
        else:
            self.failed.append(str(err))

    def run(self) -> None:
        for i in range(self.n):
            self.producer.produce(TOPIC, value=b"%d" % i, partition=i % 3, on_delivery=self._delivered)
            self.sent = i + 1
            self.producer.poll(0)
            time.sleep(0.004)
        self.producer.flush(120)


@pytest.mark.slow
def test_streaming_query_survives_kill9_of_a_partition_leader(cluster3: LocalCluster, tmp_path: Path) -> None:
    kmirror("topics", "--bootstrap-server", cluster3.bootstrap, "--create", "--topic", TOPIC, "--partitions", "3",
            "--replication-factor", "3")
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with spark_session() as spark:
        df = spark.readStream.format("kmirror").option("kafka.bootstrap.servers", cluster3.bootstrap) \
            .option("subscribe", TOPIC).option("startingOffsets", "earliest").load() \
            .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        query = df.writeStream.format("parquet").option("path", str(out)) \
            .option("checkpointLocation", str(checkpoint)).trigger(processingTime="500 milliseconds").start()
        producer = AckedProducer(cluster3.bootstrap, 3000)
        producer.start()
        wait_until(lambda: producer.sent >= 1000 and query.lastProgress is not None
                   and query.lastProgress["numInputRows"] > 0, "the query reading while records arrive")
        victim = leader_of(cluster3.bootstrap, TOPIC, 0)
        cluster3.kill9(victim)
        wait_until(lambda: leader_of(cluster3.bootstrap, TOPIC, 0) not in (victim, -1), "a new leader of ha-0")
        producer.join(180)
        assert not producer.is_alive() and not producer.failed, producer.failed
        query.processAllAvailable()
        assert query.exception() is None
        query.stop()
        rows = [(r["partition"], r["offset"], int(r["value"])) for r in spark.read.parquet(str(out)).collect()]
    positions = [(p, o) for p, o, _ in rows]
    values = [v for _, _, v in rows]
    assert len(positions) == len(set(positions)), "a record was read twice"
    assert len(values) == len(set(values)), "a value was read twice"
    assert producer.acked <= set(values), f"{len(producer.acked - set(values))} acknowledged records missing"
    assert len(producer.acked) == 3000


@pytest.mark.slow
def test_a_write_survives_kill9_of_a_partition_leader_without_duplicates(cluster3: LocalCluster) -> None:
    """The sink's idempotent producer re-sends a batch whose answer was lost with the same
    producer id and sequence: the new leader (which rebuilt the producer state from the
    replicated log) recognises it, so no record is written twice and none is lost."""
    kmirror("topics", "--bootstrap-server", cluster3.bootstrap, "--create", "--topic", "sink-ha", "--partitions", "3",
            "--replication-factor", "3")
    total = 40_000
    with spark_session() as spark:
        df = spark.range(total).selectExpr("CAST(id % 3 AS INT) AS partition",
                                           "CONCAT(CAST(id AS STRING), ':', REPEAT('x', 200)) AS value")
        killed: list[bool] = []  # whether the write was still running at the kill
        writing = threading.Event()

        def kill_a_leader_once_under_way() -> None:
            wait_until(lambda: sum(end_offsets(cluster3.bootstrap, "sink-ha", 3)) > 1000, "the write under way",
                       timeout_s=120, retry_on=(Exception,))
            victim = leader_of(cluster3.bootstrap, "sink-ha", 0)
            cluster3.kill9(victim)
            killed.append(writing.is_set())

        # The write runs in this thread (a Python data source is registered in this thread's
        # session); the kill comes from another.
        killer = threading.Thread(target=kill_a_leader_once_under_way, daemon=True)
        killer.start()
        writing.set()
        df.write.mode("append").format("kmirror").option("kafka.bootstrap.servers", cluster3.bootstrap) \
            .option("topic", "sink-ha").option("kafka.batch.size", "65536").save()
        writing.clear()
        killer.join(10)
        assert killed == [True], "the write ended before a leader was killed"
        values = [r["v"] for r in spark.read.format("kmirror").option("kafka.bootstrap.servers", cluster3.bootstrap)
                  .option("subscribe", "sink-ha").load().selectExpr("SUBSTRING_INDEX(CAST(value AS STRING), ':', 1) AS v")
                  .collect()]
    assert len(values) == len(set(values)) == total


@pytest.fixture
def node(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(dir=tmp_path / "node", port=free_port_block()) as c:
        yield c


def test_reads_and_writes_with_executors_in_separate_processes(node: LocalCluster) -> None:
    create_topic(node.bootstrap, "lc-in", 4)
    create_topic(node.bootstrap, "lc-out", 2)
    producer = Producer({"bootstrap.servers": node.bootstrap, "compression.type": "zstd", "linger.ms": 5})
    for i in range(4000):
        producer.produce("lc-in", key=b"%d" % i, value=b"value-%d" % i, partition=i % 4)
    assert producer.flush(30) == 0
    with spark_session("local-cluster[2,1,1024]") as spark:
        df = spark.read.format("kmirror").option("kafka.bootstrap.servers", node.bootstrap) \
            .option("subscribe", "lc-in").option("minPartitions", "8").load()
        pids = df.rdd.mapPartitions(lambda rows: [__import__("os").getpid()]).distinct().collect()
        assert len(pids) >= 2  # two executors, each with its own Python workers
        assert df.count() == 4000
        df.selectExpr("key", "value").write.mode("append").format("kmirror") \
            .option("kafka.bootstrap.servers", node.bootstrap).option("topic", "lc-out").save()
        back = spark.read.format("kmirror").option("kafka.bootstrap.servers", node.bootstrap) \
            .option("subscribe", "lc-out").load().selectExpr("CAST(value AS STRING) AS v").collect()
    assert sorted(r["v"] for r in back) == sorted(f"value-{i}" for i in range(4000))
