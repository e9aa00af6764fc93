"""`spark.read.format("kmirror")` and `df.write.format("kmirror")` against a real kmirror
node, with a real SparkSession (local[2]); one node and one session for the module.

Proven: a batch read equals what a confluent-kafka consumer reads (topic, partition,
offset, key, value, headers, timestamp and its type) for every codec; offset ranges by
offsets, timestamps and minPartitions; read_committed drops aborted transactions and
markers that a source log holds (and so does kmirror's console consumer); the sink round trip (topic column or option, keys,
headers, explicit partitions); a write to a missing topic fails with the broker's error;
each bad option fails with one clear message; SASL options reach the client; filters on
topic, partition and offset pushed into the read cut its tasks and return the same rows."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from kmirror.client.admin import Admin
from kmirror.log.config import LogConfig
from kmirror.log.log import Log
from kmirror.records.control import ControlType
from kmirror.runtime.node import SystemClock
from kmirror.runtime.os_fs import OsFileSystem
from kmirror.security.client_config import client_security
from kmirror.testing.kafka_clients import create_topic, watermarks
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.oidc import IdentityProvider
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.segments import partition_dir
from kmirror.testing.spark import SKIP_REASON, java_available
from kmirror.testing.transactions import TxnWriter
from kmirror.types import TopicPartition as KTopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.skipif(not java_available(), reason=SKIP_REASON)]

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
RECORDS_PER_TOPIC = 1500


def produce(bootstrap: str, topic: str, codec: str, n: int, partitions: int = 2) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20,
                         "enable.idempotence": True})
    for i in range(n):
        key = None if i % 7 == 0 else b"key-%d" % i
        headers = [("h1", b"v%d" % i), ("h2", None)] if i % 5 == 0 else None
        producer.produce(topic, key=key, value=b'{"n": %d, "pad": "%s"}' % (i, b"x" * (i % 300)),
                         headers=headers, partition=i % partitions,
                         timestamp=1_700_000_000_000 + i if i % 2 else 0)
    assert producer.flush(60) == 0


def consumer_rows(bootstrap: str, topic: str, partitions: int) -> list[tuple[Any, ...]]:
    """Every record as confluent-kafka reads it, in the kmirror source's column order."""
    rows: list[tuple[Any, ...]] = []
    for p in range(partitions):
        _, high = watermarks(bootstrap, topic, p)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{time.monotonic_ns()}",
                             "enable.auto.commit": False, "enable.partition.eof": True})
        consumer.assign([TopicPartition(topic, p, 0)])
        got = 0
        deadline = time.monotonic() + 60
        while got < high and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or (msg.error() is not None and msg.error().code() == KafkaError._PARTITION_EOF):
                continue
            assert msg.error() is None, msg.error()
            ts_type, ts = msg.timestamp()
            headers = [(k, v) for k, v in msg.headers()] if msg.headers() else None
            rows.append((msg.key(), msg.value(), msg.topic(), msg.partition(), msg.offset(), ts * 1000,
                         ts_type - 1, headers))
            got += 1
        consumer.close()
        assert got == high
    return sorted(rows, key=lambda r: (r[3], r[4]))


def spark_rows(df: Any) -> list[tuple[Any, ...]]:
    out = []
    for r in df.selectExpr("key", "value", "topic", "partition", "offset", "unix_micros(timestamp) AS ts",
                           "timestampType", "headers").collect():
        headers = [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in r["headers"]] \
            if r["headers"] is not None else None
        out.append((None if r["key"] is None else bytes(r["key"]), bytes(r["value"]), r["topic"], r["partition"],
                    r["offset"], r["ts"], r["timestampType"], headers))
    return sorted(out, key=lambda r: (r[3], r[4]))


def read(spark: Any, bootstrap: str, **options: str) -> Any:
    reader = spark.read.format("kmirror").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_batch_read_equals_a_confluent_kafka_consumer_for_every_codec(module_node: LocalCluster, spark: Any) -> None:
    for codec in CODECS:
        create_topic(module_node.bootstrap, f"codec-{codec}", 2)
        produce(module_node.bootstrap, f"codec-{codec}", codec, RECORDS_PER_TOPIC)
    for codec in CODECS:
        topic = f"codec-{codec}"
        expected = consumer_rows(module_node.bootstrap, topic, 2)
        got = spark_rows(read(spark, module_node.bootstrap, subscribe=topic, includeHeaders="true"))
        assert len(got) == RECORDS_PER_TOPIC
        assert got == expected, codec
    # One read of all five topics by pattern, without headers: the same rows, one column less.
    df = read(spark, module_node.bootstrap, subscribePattern="codec-.*")
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    assert df.count() == RECORDS_PER_TOPIC * len(CODECS)


def test_offset_ranges_timestamps_and_min_partitions(module_node: LocalCluster, spark: Any) -> None:
    create_topic(module_node.bootstrap, "ranges", 2)
    producer = Producer({"bootstrap.servers": module_node.bootstrap, "linger.ms": 0})
    for i in range(200):
        producer.produce("ranges", value=b"%d" % i, partition=i % 2, timestamp=1_000_000 + i)
    assert producer.flush(30) == 0

    def offsets(df: Any) -> list[tuple[int, int]]:
        return sorted((r["partition"], r["offset"]) for r in df.select("partition", "offset").collect())

    df = read(spark, module_node.bootstrap, subscribe="ranges", startingOffsets='{"ranges":{"0":10,"1":-2}}',
              endingOffsets='{"ranges":{"0":20,"1":5}}')
    assert offsets(df) == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(5)]
    df = read(spark, module_node.bootstrap, assign='{"ranges":[1]}', startingOffsets='{"ranges":{"1":95}}')
    assert offsets(df) == [(1, o) for o in range(95, 100)]
    # Record i has timestamp 1_000_000 + i and sits at offset i // 2 of partition i % 2.
    df = read(spark, module_node.bootstrap, subscribe="ranges", startingTimestamp="1000150", endingTimestamp="1000160")
    assert offsets(df) == [(0, o) for o in range(75, 80)] + [(1, o) for o in range(75, 80)]
    df = read(spark, module_node.bootstrap, subscribe="ranges", startingOffsetsByTimestamp='{"ranges":{"0":1000190,"1":0}}')
    assert offsets(df) == [(0, o) for o in range(95, 100)] + [(1, o) for o in range(100)]
    df = read(spark, module_node.bootstrap, subscribe="ranges", minPartitions="6")
    assert df.rdd.getNumPartitions() == 6
    assert offsets(df) == [(p, o) for p in (0, 1) for o in range(100)]


def test_pushed_filters_cut_the_planned_ranges_and_return_the_same_rows(module_node: LocalCluster,
                                                                        spark: Any) -> None:
    create_topic(module_node.bootstrap, "pushdown", 3)
    producer = Producer({"bootstrap.servers": module_node.bootstrap, "linger.ms": 0})
    for i in range(300):
        producer.produce("pushdown", key=b"k%d" % (i % 4), value=b"%d" % i, partition=i % 3)
    assert producer.flush(30) == 0
    query = "partition IN (0, 2) AND offset >= 90 AND offset < 95 AND key = X'6B31'"
    df = read(spark, module_node.bootstrap, subscribe="pushdown")
    assert df.filter(query).rdd.getNumPartitions() == 3  # pushdown off (Spark's default): every partition read
    expected = sorted((r["partition"], r["offset"]) for r in df.filter(query).collect())
    # Record i is at offset i // 3 of partition i % 3 with key k(i % 4).
    assert expected == sorted((i % 3, i // 3) for i in range(300)
                              if i % 3 in (0, 2) and 90 <= i // 3 < 95 and i % 4 == 1)
    PUSH = {"kmirror.source.pushFilters": "true"}  # noqa: N806
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        pushed = read(spark, module_node.bootstrap, subscribe="pushdown", **PUSH).filter(query)
        assert pushed.rdd.getNumPartitions() == 2  # one task per remaining partition, 5 offsets each
        assert sorted((r["partition"], r["offset"]) for r in pushed.collect()) == expected
        nothing = read(spark, module_node.bootstrap, subscribe="pushdown", **PUSH).filter("offset > 10 AND offset < 5")
        assert nothing.count() == 0
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")


def test_read_committed_skips_aborted_transactions_and_markers(module_node: LocalCluster, spark: Any) -> None:
    topic = "txn"
    create_topic(module_node.bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": module_node.bootstrap, "linger.ms": 0})
    producer.produce(topic, value=b"live", partition=0)
    assert producer.flush(30) == 0
    module_node.kill9(1)
    log = Log.open(OsFileSystem(), str(partition_dir(module_node, topic, 0)), KTopicPartition(topic, 0), LogConfig(),
                   SystemClock(), recovery_point=0)
    w = TxnWriter(log)
    w.data(7001, b"c1", b"c2")
    aborted = {w.data(7002, b"x1")}
    w.plain(b"p1")
    aborted.add(w.data(7002, b"x2"))
    w.end(ControlType.COMMIT, 7001)
    w.end(ControlType.ABORT, 7002)
    w.data(7003, b"c3")
    w.end(ControlType.COMMIT, 7003)
    end = log.log_end_offset
    log.close()
    module_node.start_node(1)
    wait_until(lambda: watermarks(module_node.bootstrap, topic, 0, "read_committed")[1] == end, "the LSO")

    def values(isolation: str) -> list[tuple[int, bytes]]:
        df = read(spark, module_node.bootstrap, subscribe=topic, **{"kafka.isolation.level": isolation})
        return sorted((r["offset"], bytes(r["value"])) for r in df.collect())

    committed = values("read_committed")
    assert [v for _, v in committed] == [b"live", b"c1", b"c2", b"p1", b"c3"]
    assert not {o for o, _ in committed} & aborted
    uncommitted = values("read_uncommitted")
    assert [v for _, v in uncommitted] == [b"live", b"c1", b"c2", b"x1", b"p1", b"x2", b"c3"]
    # kmirror's own consumer (the CLI) drops the aborted records the same way.
    printed = kmirror("console-consumer", "--bootstrap-server", module_node.bootstrap, "--topic", topic,
                      "--from-beginning", "--isolation-level", "read_committed", "--max-messages", "5",
                      "--timeout-ms", "10000").stdout.split()
    assert printed == ["live", "c1", "c2", "p1", "c3"]


def test_sink_round_trip(module_node: LocalCluster, spark: Any) -> None:
    create_topic(module_node.bootstrap, "sink-a", 3)
    create_topic(module_node.bootstrap, "sink-b", 1)
    rows = [("sink-a" if i % 2 else "sink-b", None if i % 4 == 0 else f"k{i}", f"value-{i}",
             [("h", bytearray(b"%d" % i))] if i % 3 == 0 else None, 2 if i % 10 == 1 else None) for i in range(400)]
    df = spark.createDataFrame(
        rows, "topic string, key string, value string, headers array<struct<key:string,value:binary>>, partition int")
    (df.write.mode("append").format("kmirror").option("kafka.bootstrap.servers", module_node.bootstrap)
     .option("kafka.compression.type", "lz4").save())
    back = read(spark, module_node.bootstrap, subscribePattern="sink-.*", includeHeaders="true").collect()
    got = {bytes(r["value"]).decode(): (r["topic"], None if r["key"] is None else bytes(r["key"]).decode(),
                                        [(h["key"], bytes(h["value"])) for h in r["headers"]] if r["headers"] else None,
                                        r["partition"]) for r in back}
    assert len(back) == len(got) == 400
    for topic, key, value, headers, partition in rows:
        assert got[value][:3] == (topic, key, [(k, bytes(v)) for k, v in headers] if headers else None), value
        if partition is not None:
            assert got[value][3] == partition
    # The `topic` option wins over the column; binary keys and values are kept as they are.
    spark.createDataFrame([(b"\x00\xff", b"\x01")], "key binary, value binary").write.mode("append") \
        .format("kmirror").option("kafka.bootstrap.servers", module_node.bootstrap).option("topic", "sink-b").save()
    last = read(spark, module_node.bootstrap, subscribe="sink-b").orderBy("offset", ascending=False).first()
    assert (bytes(last["key"]), bytes(last["value"])) == (b"\x00\xff", b"\x01")


def test_a_write_to_a_missing_topic_fails_with_the_brokers_error(module_node: LocalCluster, spark: Any) -> None:
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception) as info:
        df.write.mode("append").format("kmirror").option("kafka.bootstrap.servers", module_node.bootstrap) \
            .option("topic", "no-such-topic").save()
    assert "UNKNOWN_TOPIC_OR_PARTITION" in str(info.value) and "no-such-topic" in str(info.value)


@pytest.fixture(scope="module")
def options_topic(module_node: LocalCluster) -> str:
    create_topic(module_node.bootstrap, "opts", 2)
    return "opts"


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "opts", "startingOffset": "earliest"},
     "unknown option 'startingoffset' for the kmirror source (did you mean 'startingOffsets'?)"),
    ({"subscribe": "opts", "startingOffsets": '{"opts":{"0":"x"}}'},
     "invalid JSON in option 'startingoffsets'"),
    ({}, "one of the options 'assign', 'subscribe', 'subscribePattern' must be specified"),
    ({"subscribe": "opts", "subscribePattern": "c.*"}, "only one of the options 'assign', 'subscribe', "
                                                            "'subscribePattern' can be specified"),
    ({"subscribe": "no-such-topic"}, "topic 'no-such-topic' does not exist (option 'subscribe')"),
    ({"assign": '{"no-such-topic":[0]}'}, "topic 'no-such-topic' does not exist (option 'assign')"),
    ({"subscribe": "opts", "startingOffsets": '{"opts":{"0":5}}'},
     "option 'startingOffsets' must specify every partition read; missing opts-1"),
])
def test_each_bad_option_fails_with_one_clear_message(module_node: LocalCluster, spark: Any, options_topic: str,
                                                      options: dict[str, str], message: str) -> None:
    with pytest.raises(Exception) as info:
        read(spark, module_node.bootstrap, **options).count()
    text = str(info.value)
    assert "KafkaOptionError: " in text and message.lower() in text.lower(), text[-2000:]


def test_save_modes_are_those_of_sparks_kafka_sink(module_node: LocalCluster, spark: Any) -> None:
    """ErrorIfExists (the default) and Append write; Overwrite and Ignore are refused with
    Spark's Kafka sink message; another format's save modes are untouched."""
    create_topic(module_node.bootstrap, "modes", 1)
    df = spark.createDataFrame([("a",)], "value string")

    def writer() -> Any:
        return df.write.format("kmirror").option("kafka.bootstrap.servers", module_node.bootstrap) \
            .option("topic", "modes")

    writer().save()
    writer().mode("errorifexists").save()
    writer().mode("append").save()
    df.write.save(format="kmirror", mode="error", topic="modes", **{"kafka.bootstrap.servers": module_node.bootstrap})
    assert watermarks(module_node.bootstrap, "modes", 0)[1] == 4
    for mode in ("overwrite", "ignore"):
        with pytest.raises(Exception) as info:
            writer().mode(mode).save()
        assert f"Save mode {mode.capitalize()} not allowed for Kafka. Allowed save modes are Append and " \
               "ErrorIfExists (default)." in str(info.value)
    assert watermarks(module_node.bootstrap, "modes", 0)[1] == 4


def test_unsupported_save_mode_and_bad_sink_columns(module_node: LocalCluster, spark: Any, tmp_path: Path) -> None:
    df = spark.createDataFrame([(1,)], "value int")
    with pytest.raises(Exception) as info:
        df.write.mode("append").format("kmirror").option("kafka.bootstrap.servers", module_node.bootstrap) \
            .option("topic", "sink-b").save()
    assert "value attribute type must be a string or binary, got int" in str(info.value)
    with pytest.raises(Exception) as info:
        spark.createDataFrame([("v",)], "value string").write.mode("append").format("kmirror") \
            .option("kafka.bootstrap.servers", module_node.bootstrap).save()
    assert "topic option required when no 'topic' attribute is present" in str(info.value)


PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def test_sasl_options_reach_the_client(spark: Any, tmp_path: Path) -> None:
    """kafka.security.protocol / kafka.sasl.* go to kmirror's client in the planner and in the
    tasks: a SASL_PLAINTEXT listener is read and written with the right password, with PLAIN
    and with SCRAM-SHA-512, and read with OAUTHBEARER tokens of an identity provider; a wrong
    password fails with the broker's SASL_AUTHENTICATION_FAILED."""
    port = free_port_block(2)
    idp = IdentityProvider({"spark-app": "spark-secret"})
    node = LocalCluster(tmp_path / "sasl", port, 1, {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{port + 1},"
                     f"CONTROLLER://127.0.0.1:{port + 100}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{port + 1}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": f'{PLAIN_MODULE} required user_alice="alice-secret";',
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{OAUTH_MODULE} required;",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url,
        "delegation.token.secret.key": "spark-tokens",
    })
    with idp:
        node.up()
        try:
            _read_and_write_through_sasl(spark, node, port, idp)
        finally:
            node.down()


async def _token(bootstrap: str, options: dict[str, str]) -> str:
    """`sasl.jaas.config` of a new delegation token of the user `options` log in as."""
    security = client_security({k.removeprefix("kafka."): v for k, v in options.items()})
    async with await Admin.connect(bootstrap, security=security) as admin:
        return (await admin.create_delegation_token()).jaas_config()


def _read_and_write_through_sasl(spark: Any, node: LocalCluster, port: int, idp: IdentityProvider) -> None:
    create_topic(node.bootstrap, "secured", 1)

    def sasl(password: str) -> dict[str, str]:
        return {"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
                "kafka.sasl.jaas.config": f'{PLAIN_MODULE} required username="alice" password="{password}";'}

    writer = spark.createDataFrame([("a",), ("b",)], "value string").write.mode("append").format("kmirror") \
        .option("kafka.bootstrap.servers", f"127.0.0.1:{port + 1}").option("topic", "secured")
    for k, v in sasl("alice-secret").items():
        writer = writer.option(k, v)
    writer.save()
    df = read(spark, f"127.0.0.1:{port + 1}", subscribe="secured", **sasl("alice-secret"))
    assert sorted(bytes(r["value"]) for r in df.collect()) == [b"a", b"b"]
    with pytest.raises(Exception) as info:
        read(spark, f"127.0.0.1:{port + 1}", subscribe="secured", **sasl("wrong")).count()
    assert "SASL_AUTHENTICATION_FAILED" in str(info.value)
    kmirror("configs", "--bootstrap-server", node.bootstrap, "--entity-type", "users", "--entity-name", "bob",
            "--alter", "--add-config", "SCRAM-SHA-512=[password=bob-secret]")
    scram = {"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "SCRAM-SHA-512",
             "kafka.sasl.jaas.config": f'{SCRAM_MODULE} required username="bob" password="bob-secret";'}
    df = read(spark, f"127.0.0.1:{port + 1}", subscribe="secured", **scram)
    assert sorted(bytes(r["value"]) for r in df.collect()) == [b"a", b"b"]
    # a delegation token of bob's, as Spark's Kafka connector hands its executors one (KIP-48)
    token = asyncio.run(_token(f"127.0.0.1:{port + 1}", scram))
    df = read(spark, f"127.0.0.1:{port + 1}", subscribe="secured", **{**scram, "kafka.sasl.jaas.config": token})
    assert sorted(bytes(r["value"]) for r in df.collect()) == [b"a", b"b"]
    assert "authenticated as User:bob with a delegation token" in node.log_text()
    # kmirror.delegationToken: the driver creates the token with bob's password, the tasks log in with it
    by_token = node.log_text().count("with a delegation token")
    df = read(spark, f"127.0.0.1:{port + 1}", subscribe="secured", **scram, **{"kmirror.delegationToken": "true"})
    assert sorted(bytes(r["value"]) for r in df.collect()) == [b"a", b"b"]
    assert node.log_text().count("authenticated as User:bob with a delegation token") > by_token
    # ... and a streaming read, whose tasks get the token in each micro-batch's partitions
    by_token = node.log_text().count("with a delegation token")
    stream = spark.readStream.format("kmirror").option("kafka.bootstrap.servers", f"127.0.0.1:{port + 1}") \
        .option("subscribe", "secured").option("startingOffsets", "earliest").option("kmirror.delegationToken", "true")
    for k, v in scram.items():
        stream = stream.option(k, v)
    out = node.dir / "token-stream"
    query = stream.load().selectExpr("CAST(value AS STRING) AS value").writeStream.format("parquet") \
        .option("path", str(out / "data")).option("checkpointLocation", str(out / "checkpoint")) \
        .trigger(availableNow=True).start()
    assert query.awaitTermination(120) and query.exception() is None
    assert sorted(r["value"] for r in spark.read.parquet(str(out / "data")).collect()) == ["a", "b"]
    assert node.log_text().count("authenticated as User:bob with a delegation token") > by_token
    by_token = node.log_text().count("with a delegation token")
    writer = spark.createDataFrame([("c",)], "value string").write.mode("append").format("kmirror") \
        .option("kafka.bootstrap.servers", f"127.0.0.1:{port + 1}").option("topic", "secured") \
        .option("kmirror.delegationToken", "true")
    for k, v in scram.items():
        writer = writer.option(k, v)
    writer.save()
    assert node.log_text().count("authenticated as User:bob with a delegation token") > by_token
    df = read(spark, f"127.0.0.1:{port + 1}", subscribe="secured", **scram)
    assert sorted(bytes(r["value"]) for r in df.collect()) == [b"a", b"b", b"c"]
    oauth = {"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "OAUTHBEARER",
             "kafka.sasl.oauthbearer.token.endpoint.url": idp.token_endpoint,
             "kafka.sasl.jaas.config": f'{OAUTH_MODULE} required clientId="spark-app" clientSecret="spark-secret";'}
    df = read(spark, f"127.0.0.1:{port + 1}", subscribe="secured", **oauth)
    assert sorted(bytes(r["value"]) for r in df.collect()) == [b"a", b"b", b"c"]
    assert "authenticated as User:spark-app" in node.log_text()
