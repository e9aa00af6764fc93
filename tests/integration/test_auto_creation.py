"""Topic auto-creation as Kafka's (`KafkaApis.handleTopicMetadataRequest`): a Metadata request
creates the unknown topics it names only when the broker's `auto.create.topics.enable`, the
request's `allow_auto_topic_creation` (true below Metadata v4, which lacks the field) and a
named-topics request (never an all-topics one) all allow it.

On real processes with confluent-kafka: deleted topics stay deleted while a regex consumer
keeps rebalancing over the cluster's topics and a producer that wrote to them keeps producing
elsewhere; a producer that keeps producing to a deleted topic re-creates it (librdkafka
producers send `allow_auto_topic_creation=true`, and Kafka re-creates it the same way) unless
the producer sets `allow.auto.create.topics=false`; and the broker log names the client whose
request auto-created a topic."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient
from kio.schema.metadata.v3 import request as md3
from kio.schema.metadata.v12 import request as md12

from kmirror.testing.hostile import call
from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.processes import LocalCluster

pytestmark = pytest.mark.integration

DELETED = ("del-a", "del-b")


@pytest.fixture
def cluster(module_node: LocalCluster) -> LocalCluster:
    """The module's tests share one node; each names its topics with its own prefix and looks
    only for its own auto-creations."""
    return module_node


class MetadataRequests:
    """How many Metadata requests a librdkafka client has sent (its statistics, every 100 ms):
    each one is a chance for the broker to auto-create the topics it names."""

    CONFIG = {"statistics.interval.ms": 100}

    def __init__(self) -> None:
        self.sent = 0
        self.reports = 0

    def on_stats(self, stats_json: str) -> None:
        brokers = json.loads(stats_json).get("brokers", {}).values()
        self.sent = sum(int(b.get("req", {}).get("Metadata", 0)) for b in brokers)
        self.reports += 1

    def wait_more(self, more: int, poll: Callable[[], object], timeout_s: float = 60) -> None:
        """Until `more` Metadata requests were sent after the next statistics report (`poll`
        serves the client's callbacks, statistics included)."""
        deadline = time.monotonic() + timeout_s
        reports = self.reports
        while self.reports == reports:  # counted from a report made after the call
            assert time.monotonic() < deadline, "no statistics from the client"
            poll()
        wanted = self.sent + more
        while self.sent < wanted:
            assert time.monotonic() < deadline, f"{self.sent} Metadata requests sent, waiting for {wanted}"
            poll()


@contextmanager
def _regex_consumer(bootstrap: str, requests: MetadataRequests) -> Iterator[set[str]]:
    """A consumer of `^del-.*` polling on a thread; yields the topics it was last assigned."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "regex", "client.id": "regex-consumer",
                         "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 200,
                         **MetadataRequests.CONFIG, "stats_cb": requests.on_stats})
    assigned: set[str] = set()

    def on_assign(c: Consumer, partitions: list[Any]) -> None:
        assigned.clear()
        assigned.update(p.topic for p in partitions)

    consumer.subscribe(["^del-.*"], on_assign=on_assign)
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            consumer.poll(0.1)

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        yield assigned
    finally:
        stop.set()
        thread.join(30)
        consumer.close()


def _topics(admin: AdminClient, prefix: str) -> set[str]:
    return {t for t in admin.list_topics(timeout=10).topics if t.startswith(prefix)}


def _delete(admin: AdminClient, names: tuple[str, ...], prefix: str) -> None:
    for future in admin.delete_topics(list(names), operation_timeout=30).values():
        future.result()
    deadline = time.monotonic() + 30
    while _topics(admin, prefix) & set(names):  # the deletion is committed before it is answered; wait anyway
        assert time.monotonic() < deadline
        time.sleep(0.1)


def _produce_once(producer: Producer, topic: str) -> None:
    producer.produce(topic, b"v")
    producer.poll(0.1)


def test_deleted_topics_stay_deleted_beside_a_regex_consumer_and_a_producer(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for name in (*DELETED, "kept"):
        create_topic(cluster.bootstrap, name)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "client.id": "steady-producer"})
    for name in DELETED:
        producer.produce(name, b"before")
    assert producer.flush(30) == 0
    consumer_requests = MetadataRequests()
    with _regex_consumer(cluster.bootstrap, consumer_requests) as assigned:
        deadline = time.monotonic() + 60
        while assigned != set(DELETED):
            assert time.monotonic() < deadline, assigned
            time.sleep(0.05)
        _delete(admin, DELETED, "del-")
        # the consumer's metadata refreshes (all topics, every 200 ms) while the producer writes elsewhere
        consumer_requests.wait_more(10, lambda: _produce_once(producer, "kept"))
        assert _topics(admin, "del-") == set()
    assert producer.flush(30) == 0
    created = [line for line in cluster.log_text().splitlines() if "auto-creating" in line]
    assert not [line for line in created if "del-" in line or "steady-producer" in line or "regex-consumer" in line]


def test_a_producer_producing_to_a_deleted_topic_re_creates_it_unless_it_disallows(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for allow, name in ((False, "re-no"), (True, "re-yes")):
        create_topic(cluster.bootstrap, name)
        requests = MetadataRequests()
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "client.id": f"producer-{name}",
                             "allow.auto.create.topics": allow, "message.timeout.ms": 3000,
                             **MetadataRequests.CONFIG, "stats_cb": requests.on_stats})
        producer.produce(name, b"before")
        assert producer.flush(30) == 0
        _delete(admin, (name,), "re-")
        if allow:  # re-created by the producer's Metadata requests
            deadline = time.monotonic() + 30
            while name not in _topics(admin, "re-"):
                assert time.monotonic() < deadline, f"{name} not re-created"
                _produce_once(producer, name)
        else:  # the producer keeps asking for the topic (ten Metadata requests), never creating it
            requests.wait_more(10, lambda p=producer, n=name: _produce_once(p, n))
        producer.purge()
        producer.flush(5)
        assert (name in _topics(admin, "re-")) is allow
    log = cluster.log_text()
    assert "auto-creating topics ['re-yes'] for client 'producer-re-yes' (Metadata v" in log
    assert "producer-re-no" not in log


def test_allow_auto_topic_creation_per_metadata_version(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    v12 = md12.MetadataRequest(topics=(md12.MetadataRequestTopic(name="v-v12", topic_id=None),),
                               allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    assert int(call(cluster.port, 3, 12, v12).topics[0].error_code) == 3  # UNKNOWN_TOPIC_OR_PARTITION
    everything = md12.MetadataRequest(topics=None, allow_auto_topic_creation=True,
                                      include_topic_authorized_operations=False)
    call(cluster.port, 3, 12, everything)  # an all-topics request never creates
    assert _topics(admin, "v-") == set()
    v3 = md3.MetadataRequest(topics=(md3.MetadataRequestTopic(name="v-v3"),))  # no field: allowed
    assert int(call(cluster.port, 3, 3, v3).topics[0].error_code) == 5  # LEADER_NOT_AVAILABLE: being created
    assert _topics(admin, "v-") == {"v-v3"}
