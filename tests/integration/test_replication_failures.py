"""Replication under failures, with real processes and real clients (seeds 002/004):
acks=all survives leader kill -9, a paused follower leaves and rejoins the ISR, unclean
election only when enabled, and a diverging old leader is truncated when it returns."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, ConfigResource, NewTopic

from kmirror.testing.processes import LocalCluster, kmirror

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster3(module_cluster3: LocalCluster) -> LocalCluster:
    """The module's tests share the three brokers, each with its own topic: the first starts
    every broker it kills again, the last leaves one down."""
    return module_cluster3


def partition_state(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, list[int], list[int]]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    p = md.topics[topic].partitions[partition]
    return p.leader, list(p.replicas), list(p.isrs)


def wait_for(predicate, timeout_s: float, what: str, interval_s: float = 0.1):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except Exception as exc:  # metadata may be briefly unavailable during elections
            last = exc
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what} (last: {last!r})")


def create(bootstrap: str, topic: str, rf: int, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, rf, config=config)])[topic].result(30)
    wait_for(lambda: len(partition_state(bootstrap, topic)[2]) == rf, 30, f"{topic} fully in sync")


def read_all(bootstrap: str, topic: str, timeout_s: float = 30) -> dict[int, bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, 0, 0)])
    out: dict[int, bytes] = {}
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        if msg.error():
            if msg.error().code() == -191:  # _PARTITION_EOF
                break
            continue
        assert msg.offset() not in out
        out[msg.offset()] = msg.value()
    consumer.close()
    return out


class Writer(threading.Thread):
    """An idempotent acks=all producer writing unique values until stopped."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                                  "linger.ms": 5, "message.timeout.ms": 120000})
        self.topic = topic
        self.acked: dict[int, bytes] = {}
        self.failed = 0
        self.stop = threading.Event()

    def on_delivery(self, err, msg) -> None:
        if err is None:
            assert msg.offset() not in self.acked, "two acknowledged records at one offset"
            self.acked[msg.offset()] = msg.value()
        else:
            self.failed += 1

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                self.producer.produce(self.topic, value=b"unique-%d" % i, partition=0, on_delivery=self.on_delivery)
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.005)
        self.producer.flush(120)


ACKS_BETWEEN_KILLS = 50


def test_acks_all_survives_leader_kill9_five_times(cluster3):
    b = cluster3.bootstrap
    create(b, "acked", 3, {"min.insync.replicas": "2"})
    writer = Writer(b, "acked")
    writer.start()

    def acks_go_on(what: str) -> None:
        """The writer's records are acknowledged again: `ACKS_BETWEEN_KILLS` more of them."""
        wanted = len(writer.acked) + ACKS_BETWEEN_KILLS
        wait_for(lambda: len(writer.acked) >= wanted, 60, f"{ACKS_BETWEEN_KILLS} more acknowledged records {what}")

    for _ in range(5):
        acks_go_on("under the current leader")
        leader, _, _ = partition_state(b, "acked")
        cluster3.kill9(leader)
        wait_for(lambda old=leader: partition_state(b, "acked")[0] not in (-1, old), 30, "a new leader")
        acks_go_on("with the old leader down")
        cluster3.start_node(leader)
        wait_for(lambda: len(partition_state(b, "acked")[2]) == 3, 60, "the old leader back in the ISR")
    acks_go_on("after the last restart")
    writer.stop.set()
    writer.join(180)
    assert len(writer.acked) > 100
    first = read_all(b, "acked")
    second = read_all(b, "acked")
    assert first == second  # no offset holds two different records across reads
    values = list(first.values())
    assert len(values) == len(set(values))  # every record exactly once
    for offset, value in writer.acked.items():
        assert first.get(offset) == value  # every acknowledged record, at its offset


def test_paused_follower_leaves_and_rejoins_the_isr(cluster3):
    b = cluster3.bootstrap
    create(b, "paused", 3, {})
    leader, replicas, _ = partition_state(b, "paused")
    follower = next(r for r in replicas if r != leader)
    cluster3.pause(follower)
    try:
        producer = Producer({"bootstrap.servers": b, "acks": "all"})
        for i in range(50):
            producer.produce("paused", value=b"%d" % i, partition=0)
        producer.flush(30)
        wait_for(lambda: follower not in partition_state(b, "paused")[2], 30, "the paused follower out of the ISR")
    finally:
        cluster3.resume(follower)
    wait_for(lambda: follower in partition_state(b, "paused")[2], 60, "the follower back in the ISR")
    assert len(read_all(b, "paused")) == 50


def test_unclean_election_only_with_the_flag_and_old_leader_truncated(cluster3):
    b = cluster3.bootstrap
    create(b, "unclean", 2, {"min.insync.replicas": "1"})
    leader, replicas, _ = partition_state(b, "unclean")
    follower = next(r for r in replicas if r != leader)
    producer = Producer({"bootstrap.servers": b, "acks": "all"})
    for i in range(10):
        producer.produce("unclean", value=b"both-%d" % i, partition=0)
    assert producer.flush(30) == 0

    cluster3.kill9(follower)  # the leader alone keeps writing: its log diverges from the follower's
    wait_for(lambda: partition_state(b, "unclean")[2] == [leader], 30, "ISR shrunk to the leader")
    for i in range(5):
        producer.produce("unclean", value=b"only-old-leader-%d" % i, partition=0)
    assert producer.flush(30) == 0

    cluster3.kill9(leader)
    cluster3.start_node(follower)
    # The controller moves leaderships in the batch that fences a broker, and elects leaders
    # of offline partitions in the batch that unfences one: once the old leader is fenced and
    # the follower live, an election without the flag would have happened.
    def settled() -> ClusterMetadata | None:
        md = AdminClient({"bootstrap.servers": b}).list_topics("unclean", timeout=10)
        return md if follower in md.brokers and leader not in md.brokers else None

    md = wait_for(settled, 60, "the old leader fenced and the follower live in one broker's metadata")
    assert md.topics["unclean"].partitions[0].leader == -1  # offline: no unclean election without the flag

    admin = AdminClient({"bootstrap.servers": b})
    resource = ConfigResource("topic", "unclean", set_config={"unclean.leader.election.enable": "true"})
    admin.alter_configs([resource])[resource].result(30)
    out = kmirror("leader-election", "--bootstrap-server", b, "--election-type", "UNCLEAN",
                  "--topic", "unclean", "--partition", "0", check=False)
    wait_for(lambda: partition_state(b, "unclean")[0] == follower, 30, f"unclean election ({out.stdout}{out.stderr})")
    for i in range(3):
        producer.produce("unclean", value=b"after-%d" % i, partition=0)
    assert producer.flush(30) == 0

    cluster3.start_node(leader)  # the old leader returns as a follower and truncates its divergent tail
    wait_for(lambda: leader in partition_state(b, "unclean")[2], 60, "old leader back in the ISR")
    expected = {i: b"both-%d" % i for i in range(10)} | {10 + i: b"after-%d" % i for i in range(3)}
    assert read_all(b, "unclean") == expected
    # the data on the old leader now equals the new leader's: make it leader again and read
    cluster3.kill9(follower)
    wait_for(lambda: partition_state(b, "unclean")[0] == leader, 30, "old leader leading again")
    assert read_all(b, "unclean") == expected
