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

import threading
import time
from collections.abc import Iterator
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

DELETED = ("re-a", "re-b")


@contextmanager
def _regex_consumer(bootstrap: str) -> Iterator[set[str]]:
    """A consumer of `^re-.*` polling on a thread; yields the topics it was last assigned."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "regex", "client.id": "regex-consumer",
                         "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 200})
    assigned: set[str] = set()

    def on_assign(c: Consumer, partitions: list[Any]) -> None:
        assigned.clear()
        assigned.update(p.topic for p in partitions)

    consumer.subscribe(["^re-.*"], on_assign=on_assign)
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


def _topics(admin: AdminClient) -> set[str]:
    return {t for t in admin.list_topics(timeout=10).topics if t.startswith("re-")}


def _delete(admin: AdminClient, names: tuple[str, ...]) -> None:
    for future in admin.delete_topics(list(names), operation_timeout=30).values():
        future.result()
    deadline = time.monotonic() + 30
    while _topics(admin) & set(names):  # the deletion is committed before it is answered; wait anyway
        assert time.monotonic() < deadline
        time.sleep(0.1)


def _produce_for(producer: Producer, topics: tuple[str, ...], seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for t in topics:
            producer.produce(t, b"v")
        producer.poll(0.1)


def test_deleted_topics_stay_deleted_beside_a_regex_consumer_and_a_producer(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for name in (*DELETED, "kept"):
        create_topic(cluster.bootstrap, name)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "client.id": "steady-producer"})
    for name in DELETED:
        producer.produce(name, b"before")
    assert producer.flush(30) == 0
    with _regex_consumer(cluster.bootstrap) as assigned:
        deadline = time.monotonic() + 60
        while assigned != set(DELETED):
            assert time.monotonic() < deadline, assigned
            time.sleep(0.2)
        _delete(admin, DELETED)
        _produce_for(producer, ("kept",), 5)  # metadata refreshes (consumer: all topics, 200 ms) run meanwhile
        assert _topics(admin) == set()
    assert producer.flush(30) == 0
    assert "auto-creating" not in cluster.log_text()


def test_a_producer_producing_to_a_deleted_topic_re_creates_it_unless_it_disallows(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for allow, name in ((False, "re-no"), (True, "re-yes")):
        create_topic(cluster.bootstrap, name)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "client.id": f"producer-{name}",
                             "allow.auto.create.topics": allow, "message.timeout.ms": 3000})
        producer.produce(name, b"before")
        assert producer.flush(30) == 0
        _delete(admin, (name,))
        _produce_for(producer, (name,), 3)
        producer.flush(5)
        assert (name in _topics(admin)) is allow
    log = cluster.log_text()
    assert "auto-creating topics ['re-yes'] for client 'producer-re-yes' (Metadata v" in log
    assert "producer-re-no" not in log


def test_allow_auto_topic_creation_per_metadata_version(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    v12 = md12.MetadataRequest(topics=(md12.MetadataRequestTopic(name="re-v12", topic_id=None),),
                               allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    assert int(call(cluster.port, 3, 12, v12).topics[0].error_code) == 3  # UNKNOWN_TOPIC_OR_PARTITION
    everything = md12.MetadataRequest(topics=None, allow_auto_topic_creation=True,
                                      include_topic_authorized_operations=False)
    call(cluster.port, 3, 12, everything)  # an all-topics request never creates
    assert _topics(admin) == set()
    v3 = md3.MetadataRequest(topics=(md3.MetadataRequestTopic(name="re-v3"),))  # no field: allowed
    assert int(call(cluster.port, 3, 3, v3).topics[0].error_code) == 5  # LEADER_NOT_AVAILABLE: being created
    assert _topics(admin) == {"re-v3"}
