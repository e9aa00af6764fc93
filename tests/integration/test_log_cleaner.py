"""Compaction and retention on a real node, read back with confluent-kafka."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from kmirror.testing.kafka_clients import create_topic, watermarks
from kmirror.testing.metrics_scrape import scrape
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster, free_port_block
from kmirror.testing.segments import log_size, segment_files

pytestmark = pytest.mark.integration

NODE_OVERRIDES = {
    "log.cleaner.backoff.ms": "200",
    "log.retention.check.interval.ms": "300",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.segment.bytes": "16384",
}


@contextmanager
def cleaner_node(directory: Path) -> Iterator[LocalCluster]:
    with LocalCluster(dir=directory, port=free_port_block(),
                      overrides={**NODE_OVERRIDES, "metrics.port": str(free_port_block())}) as c:
        yield c


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One node shared by the module's tests: each uses its own topics."""
    with cleaner_node(tmp_path_factory.mktemp("cleaner") / "cluster") as c:
        yield c


@pytest.fixture
def own_node(tmp_path: Path) -> Iterator[LocalCluster]:
    """A node of its own, for the soak (its topic and group are the short churn's)."""
    with cleaner_node(tmp_path / "cluster") as c:
        yield c


def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record from the log start to the high watermark: (offset, key, value)."""
    low, high = watermarks(bootstrap, topic, 0)
    if high <= low:
        return []
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4()}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, low)])
    out: list[tuple[int, bytes | None, bytes | None]] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                if consumer.position([TopicPartition(topic, 0)])[0].offset >= high:
                    break
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.offset(), msg.key(), msg.value()))
            if msg.offset() >= high - 1:
                break
    finally:
        consumer.close()
    return out


def produce(producer: Producer, topic: str, records: list[tuple[bytes, bytes | None]]) -> list[int]:
    offsets: list[int] = []
    errors: list[object] = []

    def on_delivery(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            offsets.append(msg.offset())  # type: ignore[attr-defined]

    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0, on_delivery=on_delivery)
    assert producer.flush(30) == 0
    assert not errors, errors
    return offsets


def test_compaction_keeps_the_latest_value_per_key_with_offset_gaps_and_drops_tombstones(node: LocalCluster) -> None:
    b = node.bootstrap
    create_topic(b, "compacted", config={
        "cleanup.policy": "compact", "segment.bytes": "8192", "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "4000"})
    producer = Producer({"bootstrap.servers": b, "enable.idempotence": True, "linger.ms": 5, "batch.size": 2048})
    writes = [(f"key-{i % 20}".encode() if i % 50 else f"once-{i}".encode(), f"value-{i}-{'x' * 40}".encode())
              for i in range(400)]
    writes += [(f"key-{k}".encode(), None) for k in range(5)]  # tombstones for keys 0..4
    offsets = produce(producer, "compacted", writes)
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for (key, value), offset in zip(writes, offsets, strict=True):
        latest[key] = (offset, value)
    # fill the active segment past segment.bytes so every write above sits in a cleanable segment
    produce(producer, "compacted", [(f"filler-{i}".encode(), b"f" * 200) for i in range(60)])
    filler = {r[0] for r in read_all(b, "compacted") if r[1] and r[1].startswith(b"filler")}

    expected = sorted((offset, key, value) for key, (offset, value) in latest.items())

    def compacted() -> bool:
        return [r for r in read_all(b, "compacted") if r[0] not in filler] == expected
    wait_until(compacted, "the keyed writes compacted to the latest value per key", timeout_s=60)
    kept = [r for r in read_all(b, "compacted") if r[0] not in filler]
    assert [r[0] for r in kept][:8] == list(range(0, 400, 50))  # keys written once keep their offsets
    assert watermarks(b, "compacted", 0)[0] == 0  # compaction leaves gaps, never moves the log start
    assert sum(1 for r in kept if r[2] is None) == 5  # tombstones stay until delete.retention.ms

    live = sorted((offset, key, value) for key, (offset, value) in latest.items() if value is not None)
    wait_until(lambda: [r for r in read_all(b, "compacted") if r[0] not in filler] == live,
               "tombstones removed after delete.retention.ms", timeout_s=60)
    # the idempotent producer's state survived compaction: it keeps producing in sequence
    more = produce(producer, "compacted", [(b"key-1", b"after")])
    assert more[0] == watermarks(b, "compacted", 0)[1] - 1
    assert "uncleanable" not in node.log_text()
    samples = scrape(int(node.overrides["metrics.port"]))
    assert samples["kafka_log_logcleanermanager_uncleanable_partitions_count"] == 0
    assert 0 <= samples["kafka_log_logcleaner_cleaner_recopy_percent"] < 100
    assert 0 <= samples["kafka_log_logcleaner_max_buffer_utilization_percent"] < 100
    assert samples["kafka_log_logcleanermanager_time_since_last_run_ms"] < 30_000
    assert samples["kafka_log_logcleaner_deadthreadcount"] == 0


def test_retention_by_time_advances_the_log_start_offset(node: LocalCluster) -> None:
    b = node.bootstrap
    create_topic(b, "timed", config={"retention.ms": "1500", "segment.bytes": "2048"})
    producer = Producer({"bootstrap.servers": b, "linger.ms": 5, "batch.size": 1024})
    produce(producer, "timed", [(f"k{i}".encode(), b"v" * 100) for i in range(60)])
    _, end = watermarks(b, "timed", 0)
    assert end == 60
    wait_until(lambda: watermarks(b, "timed", 0)[0] == end, "every record past retention.ms deleted", timeout_s=30)
    offsets = produce(producer, "timed", [(b"late", b"v")])
    assert offsets == [60]
    assert read_all(b, "timed") == [(60, b"late", b"v")]


def test_retention_by_size_keeps_the_newest_segments(node: LocalCluster) -> None:
    b = node.bootstrap
    create_topic(b, "sized", config={"retention.bytes": "4096", "segment.bytes": "1024"})
    producer = Producer({"bootstrap.servers": b, "linger.ms": 0, "batch.num.messages": 1})
    produce(producer, "sized", [(f"k{i}".encode(), b"v" * 100) for i in range(200)])
    wait_until(lambda: watermarks(b, "sized", 0)[0] > 100, "old segments deleted by retention.bytes", timeout_s=30)
    low, high = watermarks(b, "sized", 0)
    assert high == 200
    records = read_all(b, "sized")
    assert [r[0] for r in records] == list(range(low, high))
    assert sum(len(r[2] or b"") for r in records) < 4096 + 1024


def test_segment_ms_rolls_the_active_segment_on_append(node: LocalCluster) -> None:
    b = node.bootstrap
    create_topic(b, "rolled", config={"segment.ms": "1500"})
    producer = Producer({"bootstrap.servers": b, "linger.ms": 0})
    start = time.monotonic()
    produce(producer, "rolled", [(b"k", b"first")])

    def rolled() -> bool:
        produce(producer, "rolled", [(b"k", b"again")])
        return len(segment_files(node, "rolled", 0)) >= 2
    wait_until(rolled, "a second segment after segment.ms", timeout_s=30)
    assert time.monotonic() - start >= 1.4  # not before segment.ms


def churn_commits(node: LocalCluster, seconds: float) -> int:
    """Commit offsets of a 4-partition topic as fast as one consumer can for `seconds`."""
    b = node.bootstrap
    consumer = Consumer({"bootstrap.servers": b, "group.id": "churn", "enable.auto.commit": False})
    commits = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            commits += 1
            consumer.commit(offsets=[TopicPartition("churned", p, commits) for p in range(4)], asynchronous=False)
    finally:
        consumer.close()
    return commits


def _committed(b: str) -> list[int]:
    consumer = Consumer({"bootstrap.servers": b, "group.id": "churn", "enable.auto.commit": False})
    try:
        return [tp.offset for tp in consumer.committed([TopicPartition("churned", p) for p in range(4)], timeout=30)]
    finally:
        consumer.close()


def _assert_offsets_bounded(node: LocalCluster, seconds: float) -> None:
    create_topic(node.bootstrap, "churned", partitions=4)
    commits = churn_commits(node, seconds)
    assert commits > 200
    # each commit appends ~4 records; 16 KiB segments compact down to a few records per key
    wait_until(lambda: log_size(node, "__consumer_offsets", 0) < 4 * 16384, "__consumer_offsets compacted", timeout_s=60)
    assert _committed(node.bootstrap) == [commits] * 4
    node.kill9()
    node.start_node(1)
    wait_until(lambda: _committed(node.bootstrap) == [commits] * 4, "committed offsets read back after restart",
               timeout_s=60)


def test_consumer_offsets_stay_bounded_under_commit_churn(node: LocalCluster) -> None:
    _assert_offsets_bounded(node, seconds=15)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_consumer_offsets_stay_bounded_over_ten_minutes_of_commit_churn(own_node: LocalCluster) -> None:
    _assert_offsets_bounded(own_node, seconds=600)


@pytest.mark.parametrize(("config", "value"), [("cleanup.policy", "shrink"), ("retention.ms", "-5"),
                                                ("min.cleanable.dirty.ratio", "1.5")])
def test_bad_lifecycle_configs_get_invalid_config_and_lose_nothing(node: LocalCluster, config: str, value: str) -> None:
    b = node.bootstrap
    kept = f"kept-{config}"
    admin = AdminClient({"bootstrap.servers": b})
    futures = admin.create_topics([NewTopic("refused", 1, 1, config={config: value})])
    with pytest.raises(KafkaException) as refused:
        futures["refused"].result(30)
    assert refused.value.args[0].code() == 40  # INVALID_CONFIG
    create_topic(b, kept, config={"cleanup.policy": "compact"})
    producer = Producer({"bootstrap.servers": b})
    produce(producer, kept, [(b"a", b"1"), (b"b", b"2")])
    resource = ConfigResource("topic", kept, set_config={config: value})
    with pytest.raises(KafkaException) as altered:
        admin.alter_configs([resource])[resource].result(30)
    assert altered.value.args[0].code() == 40
    assert read_all(b, kept) == [(0, b"a", b"1"), (1, b"b", b"2")]
    described = admin.describe_configs([ConfigResource("topic", kept)])
    assert next(iter(described.values())).result(30)["cleanup.policy"].value == "compact"
