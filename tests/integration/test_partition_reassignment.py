"""Partition reassignment on real processes (four brokers and a controller) with
`kmirror reassign-partitions` and confluent-kafka clients: replicas move while an acks=all
producer writes and a consumer reads, nothing acknowledged is lost or duplicated, the new
replicas hold the same bytes and the old replica directories are gone; a throttled move
runs at a bounded rate and `--verify` clears the throttle configs."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTP
from kafka.errors import (
    InvalidReplicationAssignmentError,
    NoReassignmentInProgressError,
    UnknownTopicOrPartitionError,
)

from kmirror.testing.processes import FAST_FAILURE_DETECTION, LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration

THROTTLE_WINDOW = {  # a short quota window and small follower fetches keep the throttle's burst small
    "replication.quota.window.num": "2",
    "replication.quota.window.size.seconds": "1",
    "replica.fetch.max.bytes": "65536",
}


@pytest.fixture(scope="module")
def cluster4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Shared by the module's tests, each with its own topics; the throttle test clears the
    throttles it sets, the test that kills a broker starts it again and comes last."""
    overrides = {**FAST_FAILURE_DETECTION, **THROTTLE_WINDOW}
    with LocalCluster(dir=tmp_path_factory.mktemp("reassignment") / "cluster4", port=free_port_block(4), nodes=4,
                      overrides=overrides) as c:
        yield c


def wait_for(predicate, timeout_s: float, what: str, interval_s: float = 0.1):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except Exception as exc:  # metadata may be briefly unavailable while leaders move
            last = exc
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what} (last: {last!r})")


def replicas_of(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p: (m.leader, list(m.replicas), list(m.isrs)) for p, m in md.topics[topic].partitions.items()}


def partition_dir(cluster: LocalCluster, broker: int, topic: str, partition: int) -> Path:
    return cluster.dir / f"node-{broker}" / "data" / f"{topic}-{partition}"


def log_bytes(cluster: LocalCluster, broker: int, topic: str, partition: int) -> bytes:
    d = partition_dir(cluster, broker, topic, partition)
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def write_json(path: Path, partitions: dict[tuple[str, int], list[int]]) -> Path:
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)} for (t, p), r in partitions.items()
    ]}))
    return path


class Writer(threading.Thread):
    """An idempotent acks=all producer writing unique values to every partition until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 120000})
        self.topic, self.partitions = topic, partitions
        self.acked: dict[tuple[int, int], bytes] = {}
        self.failed = 0
        self.stop = threading.Event()

    def on_delivery(self, err, msg) -> None:
        if err is None:
            key = (msg.partition(), msg.offset())
            assert key not in self.acked, "two acknowledged records at one offset"
            self.acked[key] = msg.value()
        else:
            self.failed += 1

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(self.topic, value=b"v-%d" % i, partition=i % self.partitions,
                                      on_delivery=self.on_delivery)
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.005)
        self.producer.flush(120)


class Reader(threading.Thread):
    """A consumer reading every partition from the start while the replicas move."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "mover-reader",
                                  "enable.auto.commit": False})
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.seen: dict[tuple[int, int], bytes] = {}
        self.duplicates = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            key = (msg.partition(), msg.offset())
            if key in self.seen:
                self.duplicates += 1
            self.seen[key] = msg.value()
        self.consumer.close()


def read_all(bootstrap: str, topic: str, partitions: int) -> dict[tuple[int, int], bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "checker", "enable.auto.commit": False,
                        "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[tuple[int, int], bytes] = {}
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    while len(at_end) < partitions and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == -191:  # _PARTITION_EOF
                at_end.add(msg.partition())
            continue
        key = (msg.partition(), msg.offset())
        assert key not in out
        out[key] = msg.value()
    consumer.close()
    return out


def test_reassignment_under_load_moves_every_replica_and_loses_nothing(cluster4, tmp_path):
    b = cluster4.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic("moving", num_partitions=2, replica_assignment=[[1, 2], [2, 1]],
                                  config={"min.insync.replicas": "2"})])["moving"].result(30)
    wait_for(lambda: all(len(s[2]) == 2 for s in replicas_of(b, "moving").values()), 30, "moving in sync")
    writer, reader = Writer(b, "moving", 2), Reader(b, "moving", 2)
    writer.start()
    reader.start()
    wait_for(lambda: len(writer.acked) > 300, 60, "records acknowledged before the move")

    target = write_json(tmp_path / "move.json", {("moving", 0): [3, 4], ("moving", 1): [4, 3]})
    out = kmirror("reassign-partitions", "--bootstrap-server", b, "--execute",
                  "--reassignment-json-file", str(target)).stdout
    assert "Successfully started partition reassignments for moving-0,moving-1" in out
    assert '"replicas":[1,2]' in out  # the rollback JSON holds the current assignment
    wait_for(lambda: "is still in progress" not in (v := kmirror(
        "reassign-partitions", "--bootstrap-server", b, "--verify", "--reassignment-json-file", str(target)).stdout)
        and v.count("is completed") == 2, 120, "the reassignment to complete", interval_s=1)
    acked_at_completion = len(writer.acked)
    wait_for(lambda: len(writer.acked) > acked_at_completion + 300, 60, "records acknowledged after the move")
    writer.stop.set()
    writer.join(180)
    assert writer.failed == 0

    state = replicas_of(b, "moving")
    assert sorted(state[0][1]) == [3, 4] and sorted(state[1][1]) == [3, 4]
    assert state[0][0] in (3, 4) and state[1][0] in (3, 4)
    assert "No partition reassignments found." in kmirror(
        "reassign-partitions", "--bootstrap-server", b, "--list").stdout

    stored = read_all(b, "moving", 2)
    for key, value in writer.acked.items():
        assert stored.get(key) == value  # every acknowledged record, at its offset
    values = list(stored.values())
    assert len(values) == len(set(values))  # exactly once
    wait_for(lambda: len(reader.seen) >= len(stored), 60, "the consumer to read everything")
    reader.stop.set()
    reader.join(30)
    assert reader.duplicates == 0 and reader.seen == stored

    for p in (0, 1):
        wait_for(lambda p=p: log_bytes(cluster4, 3, "moving", p) == log_bytes(cluster4, 4, "moving", p), 30,
                 f"identical replicas of moving-{p}")
        assert len(log_bytes(cluster4, 3, "moving", p)) > 0
        for old in (1, 2):
            wait_for(lambda old=old, p=p: not partition_dir(cluster4, old, "moving", p).exists()
                     and not list((cluster4.dir / f"node-{old}" / "data").glob(f"moving-{p}.*-delete")),
                     30, f"moving-{p} gone from broker {old}")


@pytest.mark.slow
def test_throttled_reassignment_moves_at_a_bounded_rate_and_verify_clears_the_throttle(cluster4, tmp_path):
    b = cluster4.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    producer = Producer({"bootstrap.servers": b, "acks": "all", "linger.ms": 20, "compression.type": "none"})
    payload = bytes(range(256)) * 40  # 10 KiB, never compressed
    for topic in ("heavy", "baseline"):
        admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1]])])[topic].result(30)
        for i in range(300):  # ~3 MB
            producer.produce(topic, value=payload + b"%d" % i, partition=0)
            if i % 50 == 0:
                producer.flush(30)
        assert producer.flush(60) == 0
    size = len(log_bytes(cluster4, 1, "heavy", 0))
    assert size > 3_000_000

    # the same move without a throttle, in the same run, for comparison
    started = time.monotonic()
    kmirror("reassign-partitions", "--bootstrap-server", b, "--execute", "--reassignment-json-file",
            str(write_json(tmp_path / "baseline.json", {("baseline", 0): [2]})))
    wait_for(lambda: replicas_of(b, "baseline")[0][1] == [2], 300, "the unthrottled move", interval_s=0.2)
    baseline_rate = len(log_bytes(cluster4, 2, "baseline", 0)) / (time.monotonic() - started)

    throttle = 200_000
    target = write_json(tmp_path / "heavy.json", {("heavy", 0): [2]})
    started = time.monotonic()
    out = kmirror("reassign-partitions", "--bootstrap-server", b, "--execute", "--reassignment-json-file",
                  str(target), "--throttle", str(throttle)).stdout
    assert f"The inter-broker throttle limit was set to {throttle} B/s" in out
    # the throttle configs as kafka-reassign-partitions.sh sets them
    topic_configs = admin.describe_configs([ConfigResource("TOPIC", "heavy")])
    configs = next(iter(topic_configs.values())).result(30)
    assert configs["leader.replication.throttled.replicas"].value == "0:1"
    assert configs["follower.replication.throttled.replicas"].value == "0:2"
    wait_for(lambda: replicas_of(b, "heavy")[0][1] == [2], 300, "the throttled move to complete", interval_s=0.2)
    elapsed = time.monotonic() - started
    rate = size / elapsed
    assert log_bytes(cluster4, 2, "heavy", 0) == log_bytes(cluster4, 1, "heavy", 0) or \
        not partition_dir(cluster4, 1, "heavy", 0).exists()
    print(f"throttled move: {size} bytes in {elapsed:.1f} s = {rate:.0f} B/s (throttle {throttle} B/s); "
          f"unthrottled: {baseline_rate:.0f} B/s")
    assert rate < 2 * throttle, f"moved at {rate:.0f} B/s with a {throttle} B/s throttle"
    assert rate < baseline_rate

    verify = kmirror("reassign-partitions", "--bootstrap-server", b, "--verify",
                     "--reassignment-json-file", str(target)).stdout
    assert "Reassignment of partition heavy-0 is completed." in verify
    assert "Clearing broker-level throttles on brokers 1,2,3,4" in verify
    configs = next(iter(admin.describe_configs([ConfigResource("TOPIC", "heavy")]).values())).result(30)
    assert configs["leader.replication.throttled.replicas"].value in ("", None)
    assert configs["follower.replication.throttled.replicas"].value in ("", None)
    broker = next(iter(admin.describe_configs([ConfigResource("BROKER", "2")]).values())).result(30)
    assert "leader.replication.throttled.rate" not in broker or \
        broker["leader.replication.throttled.rate"].source != 1  # no DYNAMIC_BROKER_CONFIG left
    assert len(read_all(b, "heavy", 1)) == 300


def test_cancel_errors_and_generate_with_kafka_python_and_the_cli(cluster4, tmp_path):
    b = cluster4.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic("stuck", num_partitions=2, replica_assignment=[[1, 2], [2, 1]])])["stuck"].result(30)
    wait_for(lambda: all(len(s[2]) == 2 for s in replicas_of(b, "stuck").values()), 30, "stuck in sync")
    producer = Producer({"bootstrap.servers": b, "acks": "all"})
    for i in range(100):
        producer.produce("stuck", value=b"s%d" % i, partition=i % 2)
    assert producer.flush(30) == 0

    kp = KafkaAdminClient(bootstrap_servers=b)
    try:
        # Kafka's errors, per partition
        answer = kp.alter_partition_reassignments({
            KTP("stuck", 0): None, KTP("stuck", 5): [1, 2], KTP("missing", 0): [1, 2],
            KTP("stuck", 1): [1, 1]})
        assert answer[KTP("stuck", 0)] is NoReassignmentInProgressError
        assert answer[KTP("stuck", 5)] is UnknownTopicOrPartitionError
        assert answer[KTP("missing", 0)] is UnknownTopicOrPartitionError
        assert answer[KTP("stuck", 1)] is InvalidReplicationAssignmentError
        assert kp.alter_partition_reassignments({KTP("stuck", 1): [1, 9]})[KTP("stuck", 1)] is \
            InvalidReplicationAssignmentError

        # broker 4 is down: a move onto it stays in progress until cancelled. The admin client
        # sends to the broker its metadata named controller (the one it asked, as Kafka's brokers
        # answer): a new client, bootstrapped on broker 1 once the fenced broker 4 has left the
        # metadata, keeps that off the killed broker.
        cluster4.kill9(4)
        kp.close()
        wait_for(lambda: 4 not in AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster4.port}"})
                 .list_topics(timeout=10).brokers, 30, "broker 4 fenced and out of the metadata")
        kp = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{cluster4.port}")
        assert kp.alter_partition_reassignments({KTP("stuck", 0): [1, 4]}) == {KTP("stuck", 0): None}
        ongoing = kp.list_partition_reassignments()
        assert ongoing == {KTP("stuck", 0): {"replicas": [1, 4, 2], "adding_replicas": [4], "removing_replicas": [2]}}
    finally:
        kp.close()
    assert "stuck-0: replicas: 1,4,2. adding: 4. removing: 2." in kmirror(
        "reassign-partitions", "--bootstrap-server", b, "--list").stdout
    described = kmirror("topics", "--bootstrap-server", b, "--describe", "--topic", "stuck").stdout
    assert "Replicas: 1,4,2\tIsr: 1,2\tAdding Replicas: 4\tRemoving Replicas: 2" in described
    plan = write_json(tmp_path / "stuck.json", {("stuck", 0): [1, 4]})
    verify = kmirror("reassign-partitions", "--bootstrap-server", b, "--verify", "--reassignment-json-file",
                     str(plan)).stdout
    assert "Reassignment of partition stuck-0 is still in progress." in verify and "Clearing" not in verify
    refused = kmirror("reassign-partitions", "--bootstrap-server", b, "--execute", "--reassignment-json-file",
                      str(plan), check=False)
    assert refused.returncode == 1 and "existing partition assignment" in refused.stderr
    out = kmirror("reassign-partitions", "--bootstrap-server", b, "--cancel", "--reassignment-json-file",
                  str(plan)).stdout
    assert "Successfully cancelled partition reassignments for: stuck-0" in out
    assert sorted(replicas_of(b, "stuck")[0][1]) == [1, 2]
    assert "No partition reassignments found." in kmirror("reassign-partitions", "--bootstrap-server", b,
                                                          "--list").stdout
    cluster4.start_node(4)
    wait_for(lambda: not partition_dir(cluster4, 4, "stuck", 0).exists(), 30, "no replica of stuck-0 on broker 4")
    assert len(read_all(b, "stuck", 2)) == 100

    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": "stuck"}], "version": 1}))
    out = kmirror("reassign-partitions", "--bootstrap-server", b, "--generate", "--topics-to-move-json-file",
                  str(topics), "--broker-list", "3,4").stdout
    current, proposed = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert {p["partition"]: sorted(p["replicas"]) for p in current["partitions"]} == {0: [1, 2], 1: [1, 2]}
    assert {p["partition"]: sorted(p["replicas"]) for p in proposed["partitions"]} == {0: [3, 4], 1: [3, 4]}
