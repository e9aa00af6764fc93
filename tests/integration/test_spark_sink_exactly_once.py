"""Exactly-once streaming writes of the kmirror sink (`kmirror.sink.exactlyOnce=true`) with a real
SparkSession against a real kmirror node.

Proven: a micro-batch Spark runs again after its tasks committed (the state a crash leaves
between the sink's commit and the checkpoint's commit log, made here by removing the commit
log entry) is not written twice under read_committed, while the default at-least-once sink
writes it twice; each task's marker group holds the last batch id; a Spark driver killed
with SIGKILL in the middle of a batch (a transaction open on the output topic) and the same
query restarted from its checkpoint give every input record exactly once under
read_committed; batch writes refuse the option."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition

from kmirror.client.cluster import Cluster
from kmirror.client.groups import GroupAdmin
from kmirror.testing.kafka_clients import create_topic, watermarks
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster
from kmirror.testing.spark import SKIP_REASON, java_available

pytestmark = [pytest.mark.integration, pytest.mark.skipif(not java_available(), reason=SKIP_REASON)]


def produce(bootstrap: str, topic: str, n: int, partitions: int, pad: int = 50) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    values = [b"record-%06d-%s" % (i, b"x" * (i % pad)) for i in range(n)]
    for i, v in enumerate(values):
        producer.produce(topic, key=b"k%d" % (i % 97), value=v, partition=i % partitions)
    assert producer.flush(60) == 0
    return values


def read_values(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every value a consumer of `isolation` reads, each partition read to its end."""
    out: list[bytes] = []
    for p in range(partitions):
        _, end = watermarks(bootstrap, topic, p, isolation)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4()}",
                             "isolation.level": isolation, "enable.auto.commit": False})
        consumer.assign([CTopicPartition(topic, p, 0)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                if consumer.position([CTopicPartition(topic, p)])[0].offset >= end:
                    break
                continue
            assert msg.error() is None, msg.error()
            out.append(msg.value())
            if msg.offset() + 1 >= end:
                break
        consumer.close()
    return out


def start_copy(spark: Any, bootstrap: str, source: str, out: str, checkpoint: Path, exactly_once: bool,
               max_per_trigger: int) -> Any:
    df = spark.readStream.format("kmirror").option("kafka.bootstrap.servers", bootstrap) \
        .option("subscribe", source).option("startingOffsets", "earliest") \
        .option("maxOffsetsPerTrigger", str(max_per_trigger)).load()
    return df.selectExpr("key", "value").writeStream.format("kmirror") \
        .option("kafka.bootstrap.servers", bootstrap).option("topic", out) \
        .option("kmirror.sink.exactlyOnce", "true" if exactly_once else "false") \
        .option("checkpointLocation", str(checkpoint)).start()


def forget_last_commit(checkpoint: Path) -> int:
    """Remove the newest commit log entry, as a crash after the sink committed and before Spark
    wrote its commit log leaves the checkpoint; returns that batch id."""
    commits = checkpoint / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    return last


def query_id(checkpoint: Path) -> str:
    return str(json.loads((checkpoint / "metadata").read_text())["id"])


class Groups(GroupAdmin):
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster


def markers(bootstrap: str, qid: str, tasks: int) -> list[int | None]:
    """The last committed batch id in each task's marker group."""
    async def read() -> list[int | None]:
        cluster = Cluster(bootstrap)
        try:
            groups = Groups(cluster)
            out: list[int | None] = []
            for p in range(tasks):
                offsets = await groups.list_consumer_group_offsets(f"kmirror-sink-{qid}-{p}", require_stable=True)
                out.append(max((o.offset for o in offsets.values()), default=None))
            return out
        finally:
            await cluster.close()
    return asyncio.run(read())


@pytest.mark.parametrize("exactly_once", [True, False])
def test_a_replayed_batch_is_not_written_twice(module_node: LocalCluster, spark: Any, tmp_path: Path,
                                               exactly_once: bool) -> None:
    source, out = f"eos-in-{exactly_once}".lower(), f"eos-out-{exactly_once}".lower()
    create_topic(module_node.bootstrap, source, 3)
    create_topic(module_node.bootstrap, out, 2)
    values = produce(module_node.bootstrap, source, 1000, 3)
    checkpoint = tmp_path / "checkpoint"
    query = start_copy(spark, module_node.bootstrap, source, out, checkpoint, exactly_once, 300)
    query.processAllAvailable()
    query.stop()
    assert sorted(read_values(module_node.bootstrap, out, 2, "read_committed")) == sorted(values)
    replayed = forget_last_commit(checkpoint)

    query = start_copy(spark, module_node.bootstrap, source, out, checkpoint, exactly_once, 300)
    query.processAllAvailable()
    ran = [(p["batchId"], p["numInputRows"]) for p in query.recentProgress if p["numInputRows"]]
    query.stop()
    assert [b for b, _ in ran] == [replayed]  # Spark ran the batch again, with the same offsets
    again = ran[0][1]
    got = read_values(module_node.bootstrap, out, 2, "read_committed")
    if exactly_once:
        assert len(got) == 1000 and sorted(got) == sorted(values)
        assert markers(module_node.bootstrap, query_id(checkpoint), 3) == [replayed] * 3
    else:  # the default sink is at-least-once, as Spark's Kafka sink: the batch's records twice
        assert len(got) == 1000 + again and set(got) == set(values)


# The job copies `source` to `out` exactly-once, one record per produce request (a tiny
# kafka.batch.size), so each task's transaction stays open for seconds and the driver can be
# killed while one is open: in the middle of a batch, not between two.
JOB = """
import sys
from kmirror.testing.spark import spark_session
bootstrap, source, out, checkpoint = sys.argv[1:5]
with spark_session() as spark:
    query = (spark.readStream.format("kmirror").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", source).option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", "9000")
             .load().selectExpr("key", "value").writeStream.format("kmirror")
             .option("kafka.bootstrap.servers", bootstrap).option("topic", out).option("kafka.batch.size", "1")
             .option("kmirror.sink.exactlyOnce", "true").option("checkpointLocation", checkpoint).start())
    query.awaitTermination()
"""


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_query_killed_mid_batch_and_restarted_writes_each_record_once(module_node: LocalCluster, spark: Any,
                                                                        tmp_path: Path) -> None:
    source, out = "eos-kill-in", "eos-kill-out"
    create_topic(module_node.bootstrap, source, 3)
    create_topic(module_node.bootstrap, out, 3)
    values = produce(module_node.bootstrap, source, 27_000, 3)
    checkpoint = tmp_path / "checkpoint"
    job = subprocess.Popen([sys.executable, "-c", JOB, module_node.bootstrap, source, out, str(checkpoint)],
                           start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def open_transaction() -> bool:
            assert job.poll() is None, "the job ended before it could be killed mid-batch"
            return any(watermarks(module_node.bootstrap, out, p, "read_committed")[1]
                       < watermarks(module_node.bootstrap, out, p, "read_uncommitted")[1] for p in range(3))
        wait_until(open_transaction, "a transaction of the sink open on the output topic", timeout_s=600)
        batch = max(int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit())
        assert not (checkpoint / "commits" / str(batch)).exists()  # killed inside batch `batch`
    finally:
        os.killpg(job.pid, signal.SIGKILL)  # the driver, its JVM and Python workers: nothing commits or aborts
        job.wait(30)
    uncommitted = read_values(module_node.bootstrap, out, 3, "read_uncommitted")
    assert len(uncommitted) > len(read_values(module_node.bootstrap, out, 3, "read_committed"))

    query = start_copy(spark, module_node.bootstrap, source, out, checkpoint, True, 9000)
    query.processAllAvailable()
    query.stop()
    got = read_values(module_node.bootstrap, out, 3, "read_committed")
    assert len(got) == len(values) and sorted(got) == sorted(values)
    assert len(read_values(module_node.bootstrap, out, 3, "read_uncommitted")) > len(values)  # aborted rows stay


def test_a_batch_write_refuses_exactly_once(module_node: LocalCluster, spark: Any) -> None:
    with pytest.raises(Exception) as info:
        spark.createDataFrame([("v",)], "value string").write.mode("append").format("kmirror") \
            .option("kafka.bootstrap.servers", module_node.bootstrap).option("topic", "eos-out-true") \
            .option("kmirror.sink.exactlyOnce", "true").save()
    assert "option 'kmirror.sink.exactlyOnce' applies to streaming writes (writeStream)" in str(info.value)
