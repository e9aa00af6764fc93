"""`spark.readStream.format("kmirror")` and `writeStream` against a real kmirror node, with a
real SparkSession (local[2]); one node and one session for the module.

Proven: a query stopped and restarted from its checkpoint loses nothing and repeats
nothing, and its checkpoint holds Spark's Kafka source offsets; maxOffsetsPerTrigger
bounds each micro-batch; minOffsetsPerTrigger holds triggers back until enough records
are new or maxTriggerDelay has passed, and not under Trigger.AvailableNow; partitions added to a topic and new topics matching the pattern
are read from their first offset; records deleted below the checkpoint fail the query with
a message naming the topic, partition and offsets (failOnDataLoss=true) or are skipped
(false); a streaming write through the kmirror sink arrives once per record; a query with
`kmirror.delegationToken` outlives its tokens (renewed, then replaced)."""

from __future__ import annotations

import asyncio
import datetime
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions

from kmirror.client.admin import Admin
from kmirror.client.delegation_tokens import DelegationToken
from kmirror.security.client_config import client_security
from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.spark import SKIP_REASON, java_available

pytestmark = [pytest.mark.integration, pytest.mark.skipif(not java_available(), reason=SKIP_REASON)]


def produce(bootstrap: str, topic: str, values: range, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in values:
        producer.produce(topic, value=b"%d" % i, partition=i % partitions)
    assert producer.flush(30) == 0


def stream(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.readStream.format("kmirror").option("kafka.bootstrap.servers", bootstrap) \
        .option("startingOffsets", "earliest")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def run_to_parquet(df: Any, out: Path, checkpoint: Path) -> Any:
    query = df.selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value").writeStream \
        .format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint)).start()
    query.processAllAvailable()
    return query


def read_back(spark: Any, out: Path) -> list[tuple[str, int, int, str]]:
    return sorted((r["topic"], r["partition"], r["offset"], r["value"]) for r in spark.read.parquet(str(out)).collect())


def test_a_query_restarted_from_its_checkpoint_loses_and_repeats_nothing(module_node: LocalCluster, spark: Any,
                                                                        tmp_path: Path) -> None:
    create_topic(module_node.bootstrap, "orders", 3)
    produce(module_node.bootstrap, "orders", range(300), 3)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = run_to_parquet(stream(spark, module_node.bootstrap, subscribe="orders", maxOffsetsPerTrigger="100"), out,
                           checkpoint)
    progress = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    query.stop()
    assert sum(progress) == 300 and max(progress) <= 100 and len(progress) >= 3
    # The checkpoint holds Spark's Kafka source offsets: {"topic": {"partition": next offset}}.
    last = max((p for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    assert json.loads(last.read_text().splitlines()[-1]) == {"orders": {"0": 100, "1": 100, "2": 100}}

    produce(module_node.bootstrap, "orders", range(300, 600), 3)
    query = run_to_parquet(stream(spark, module_node.bootstrap, subscribe="orders"), out, checkpoint)
    query.stop()
    rows = read_back(spark, out)
    assert len(rows) == len(set(rows)) == 600
    assert sorted(int(v) for _, _, _, v in rows) == list(range(600))
    assert {(p, o) for _, p, o, _ in rows} == {(p, o) for p in range(3) for o in range(200)}


def test_new_partitions_and_new_topics_matching_the_pattern_are_read(module_node: LocalCluster, spark: Any,
                                                                     tmp_path: Path) -> None:
    create_topic(module_node.bootstrap, "grow-a", 1)
    produce(module_node.bootstrap, "grow-a", range(10), 1)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = run_to_parquet(stream(spark, module_node.bootstrap, subscribePattern="grow-.*"), out, checkpoint)
    admin = AdminClient({"bootstrap.servers": module_node.bootstrap})
    admin.create_partitions([NewPartitions("grow-a", 2)])["grow-a"].result(30)
    create_topic(module_node.bootstrap, "grow-b", 1)
    produce(module_node.bootstrap, "grow-a", range(10, 20), 2)
    produce(module_node.bootstrap, "grow-b", range(20, 25), 1)
    query.processAllAvailable()
    query.stop()
    rows = read_back(spark, out)
    assert len(rows) == 25
    assert {(t, p) for t, p, _, _ in rows} == {("grow-a", 0), ("grow-a", 1), ("grow-b", 0)}
    assert sorted(o for t, p, o, _ in rows if (t, p) == ("grow-a", 1)) == list(range(5))  # from its first offset


def test_records_deleted_below_the_checkpoint_are_data_loss(module_node: LocalCluster, spark: Any, tmp_path: Path) -> None:
    create_topic(module_node.bootstrap, "loss", 1)
    produce(module_node.bootstrap, "loss", range(100), 1)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    run_to_parquet(stream(spark, module_node.bootstrap, subscribe="loss"), out, checkpoint).stop()
    produce(module_node.bootstrap, "loss", range(100, 200), 1)
    admin = AdminClient({"bootstrap.servers": module_node.bootstrap})
    admin.delete_records([CTopicPartition("loss", 0, 150)])[CTopicPartition("loss", 0, 150)].result(30)

    query = stream(spark, module_node.bootstrap, subscribe="loss").selectExpr("offset").writeStream.format("parquet") \
        .option("path", str(out)).option("checkpointLocation", str(checkpoint)).start()
    with pytest.raises(Exception) as info:
        query.awaitTermination(120)
    query.stop()
    text = str(info.value)
    assert "DataLossError: Cannot fetch offset 100 of loss-0: the log starts at 150; offsets [100, 150) are lost" \
        in text, text[-3000:]
    assert 'set the source option "failOnDataLoss" to "false"' in text

    query = run_to_parquet(stream(spark, module_node.bootstrap, subscribe="loss", failOnDataLoss="false"), out, checkpoint)
    query.stop()
    offsets = sorted(o for _, _, o, _ in read_back(spark, out))
    assert offsets == list(range(100)) + list(range(150, 200))


def test_a_streaming_write_through_the_sink_arrives_once(module_node: LocalCluster, spark: Any, tmp_path: Path) -> None:
    create_topic(module_node.bootstrap, "copy-in", 2)
    create_topic(module_node.bootstrap, "copy-out", 2)
    produce(module_node.bootstrap, "copy-in", range(500), 2)
    query = stream(spark, module_node.bootstrap, subscribe="copy-in").selectExpr("key", "value", "partition").writeStream \
        .format("kmirror").option("kafka.bootstrap.servers", module_node.bootstrap).option("topic", "copy-out") \
        .option("checkpointLocation", str(tmp_path / "checkpoint")).start()
    query.processAllAvailable()
    query.stop()
    rows = spark.read.format("kmirror").option("kafka.bootstrap.servers", module_node.bootstrap) \
        .option("subscribe", "copy-out").load().selectExpr("partition", "CAST(value AS STRING) AS v").collect()
    assert sorted(int(r["v"]) for r in rows) == list(range(500))
    assert all(int(r["v"]) % 2 == r["partition"] for r in rows)  # the partition column was honoured


def test_trigger_available_now_reads_what_was_there_in_rate_limited_batches(module_node: LocalCluster, spark: Any,
                                                                             tmp_path: Path) -> None:
    create_topic(module_node.bootstrap, "now", 2)
    produce(module_node.bootstrap, "now", range(500), 2)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run_available_now() -> list[int]:
        query = stream(spark, module_node.bootstrap, subscribe="now", maxOffsetsPerTrigger="100") \
            .selectExpr("topic", "partition", "offset", "CAST(value AS STRING) AS value").writeStream \
            .format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint)) \
            .trigger(availableNow=True).start()
        assert query.awaitTermination(120)
        return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]

    assert run_available_now() == [100] * 5
    produce(module_node.bootstrap, "now", range(500, 560), 2)
    assert run_available_now() == [60]
    values = sorted(int(v) for _, _, _, v in read_back(spark, out))
    assert values == list(range(560))


@contextmanager
def no_data_progress_every_100_ms(spark: Any) -> Iterator[None]:
    """Spark reports a trigger that found nothing to read at most every 10 s by default; here
    every 100 ms, so a test sees the triggers a minimum held back."""
    key = "spark.sql.streaming.noDataProgressEventInterval"
    spark.conf.set(key, "100ms")
    try:
        yield
    finally:
        spark.conf.unset(key)


def batches(query: Any) -> list[tuple[int, float]]:
    """(input rows, trigger start in epoch seconds) of every micro-batch that read records."""
    return [(p["numInputRows"], datetime.datetime.fromisoformat(p["timestamp"]).timestamp())
            for p in query.recentProgress if p["numInputRows"]]


def held_back_trigger_after(query: Any, moment: float) -> Callable[[], bool]:
    """A trigger that started after `moment` (epoch seconds) and ran no batch."""
    return lambda: any(not p["numInputRows"] and datetime.datetime.fromisoformat(p["timestamp"]).timestamp() > moment
                       for p in query.recentProgress)


def test_min_offsets_per_trigger_holds_a_trigger_back_until_enough_records_are_new(
        module_node: LocalCluster, spark: Any, tmp_path: Path) -> None:
    create_topic(module_node.bootstrap, "min-trigger", 2)
    produce(module_node.bootstrap, "min-trigger", range(50), 2)
    with no_data_progress_every_100_ms(spark):
        query = stream(spark, module_node.bootstrap, subscribe="min-trigger", minOffsetsPerTrigger="100",
                       maxTriggerDelay="1h").selectExpr("offset").writeStream.format("parquet") \
            .option("path", str(tmp_path / "out")).option("checkpointLocation", str(tmp_path / "checkpoint")) \
            .trigger(processingTime="100 milliseconds").start()
        try:
            wait_until(lambda: [n for n, _ in batches(query)] == [50], "the first trigger's batch (it always runs)")
            produce(module_node.bootstrap, "min-trigger", range(50, 110), 2)
            wait_until(held_back_trigger_after(query, time.time()), "a trigger with 60 new records")
            assert [n for n, _ in batches(query)] == [50]  # 60 < minOffsetsPerTrigger: held back
            produce(module_node.bootstrap, "min-trigger", range(110, 150), 2)
            wait_until(lambda: [n for n, _ in batches(query)] == [50, 100], "a batch of the 100 new records")
        finally:
            query.stop()
    assert sorted(r["offset"] for r in spark.read.parquet(str(tmp_path / "out")).collect()) == \
        sorted(list(range(75)) * 2)


def test_max_trigger_delay_lets_fewer_records_through_after_the_delay(module_node: LocalCluster, spark: Any,
                                                                      tmp_path: Path) -> None:
    create_topic(module_node.bootstrap, "max-delay", 1)
    produce(module_node.bootstrap, "max-delay", range(10), 1)
    query = stream(spark, module_node.bootstrap, subscribe="max-delay", minOffsetsPerTrigger="1000",
                   maxTriggerDelay="3s").selectExpr("offset").writeStream.format("parquet") \
        .option("path", str(tmp_path / "out")).option("checkpointLocation", str(tmp_path / "checkpoint")) \
        .trigger(processingTime="100 milliseconds").start()
    try:
        wait_until(lambda: len(batches(query)) == 1, "the first trigger's batch")
        produce(module_node.bootstrap, "max-delay", range(10, 15), 1)
        wait_until(lambda: len(batches(query)) == 2, "a batch after maxTriggerDelay")
    finally:
        query.stop()
    (first, started), (second, then) = batches(query)
    assert (first, second) == (10, 5)
    # Held back for maxTriggerDelay after the first batch (lower bound only: a loaded machine is slower).
    assert then - started >= 2.9


def test_trigger_available_now_reads_everything_whatever_the_minimum(module_node: LocalCluster, spark: Any,
                                                                     tmp_path: Path) -> None:
    create_topic(module_node.bootstrap, "now-min", 1)
    produce(module_node.bootstrap, "now-min", range(30), 1)
    # Without the exception the second trigger (10 records < 15) would be held back and the
    # query would end with them unread.
    query = stream(spark, module_node.bootstrap, subscribe="now-min", minOffsetsPerTrigger="15",
                   maxOffsetsPerTrigger="20", maxTriggerDelay="1h").selectExpr("offset").writeStream \
        .format("parquet").option("path", str(tmp_path / "out")) \
        .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
    assert query.awaitTermination(120)
    assert [n for n, _ in batches(query)] == [20, 10]


SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def test_a_streaming_read_outlives_its_delegation_tokens(spark: Any, tmp_path: Path) -> None:
    """`kmirror.delegationToken` on a query that runs longer than any token lives: a token
    expires 8 s after its creation or last renewal and lives 18 s at most, and the query reads
    for 24 s, a micro-batch a second. The driver renews its token and creates a new one
    before the max lifetime, so every micro-batch's tasks log in with a valid token: the query
    never fails and reads every record once."""
    port = free_port_block(2)
    node = LocalCluster(tmp_path / "tokens", port, 1, {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{port + 1},"
                     f"CONTROLLER://127.0.0.1:{port + 100}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{port + 1}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "delegation.token.secret.key": "stream-tokens",
        "delegation.token.expiry.time.ms": "8000",
        "delegation.token.max.lifetime.ms": "18000",
    })
    with node:
        create_topic(node.bootstrap, "ticks", 2)
        kmirror("configs", "--bootstrap-server", node.bootstrap, "--entity-type", "users", "--entity-name", "bob",
                "--alter", "--add-config", "SCRAM-SHA-512=[password=bob-secret]")
        bob = {"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "SCRAM-SHA-512",
               "kafka.sasl.jaas.config": f'{SCRAM_MODULE} required username="bob" password="bob-secret";'}
        df = stream(spark, f"127.0.0.1:{port + 1}", subscribe="ticks", **bob, **{"kmirror.delegationToken": "true"})
        query = df.selectExpr("CAST(value AS STRING) AS value").writeStream.format("memory") \
            .queryName("token_ticks").option("checkpointLocation", str(tmp_path / "checkpoint")) \
            .trigger(processingTime="1 second").start()
        try:
            producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 0})
            producer.produce("ticks", value=b"0", partition=0)
            producer.flush(10)
            # the clock starts once the query has read (its token exists): on a loaded machine a
            # query's first micro-batch can take seconds, and its token lives from then on
            query.processAllAvailable()
            started = time.monotonic()
            i = 1
            while time.monotonic() - started < 24:
                producer.produce("ticks", value=b"%d" % i, partition=i % 2)
                producer.flush(10)
                i += 1
                assert query.exception() is None, query.exception()
                time.sleep(0.25)
            query.processAllAvailable()
            values = sorted(int(r["value"]) for r in spark.sql("SELECT value FROM token_ticks").collect())
        finally:
            query.stop()
        assert query.exception() is None
        assert values == list(range(i))
        tokens = asyncio.run(bobs_tokens(f"127.0.0.1:{port + 1}", bob))
        assert len(tokens) >= 2, "a new token before the first one's max lifetime"
        assert any(t.expiry_timestamp_ms > t.issue_timestamp_ms + 8000 for t in tokens), "a token renewed"
        first_expiry = datetime.datetime.fromtimestamp(min(t.issue_timestamp_ms for t in tokens) / 1000 + 8)
        logins = [datetime.datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f") for line in node.log_text().splitlines()
                  if "authenticated as User:bob with a delegation token" in line]
        assert logins and logins[-1] > first_expiry, "tasks logged in with a token after the first one would have expired"


async def bobs_tokens(bootstrap: str, options: dict[str, str]) -> list[DelegationToken]:
    security = client_security({k.removeprefix("kafka."): v for k, v in options.items()})
    async with await Admin.connect(bootstrap, security=security) as admin:
        return await admin.describe_delegation_tokens()
