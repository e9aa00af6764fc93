"""A deleted topic takes its committed offsets with it (Kafka `onPartitionsDeleted`), on a real
node with confluent-kafka: a group that read 10 records of a topic, which is then deleted and
re-created under the same name with 15 new records, reads all 15 from the start (its reset
policy), not the new topic from the old one's offset 10. An offset of the deleted topic that a
transaction still open held stays gone once the transaction commits, after a restart too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kmirror.testing.kafka_clients import consume_values, create_topic, produce_values
from kmirror.testing.mirror_clusters import wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

pytestmark = pytest.mark.integration

TOPIC = "recreated"


@pytest.fixture
def node(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(dir=tmp_path / "node", port=free_port_block()) as c:
        yield c


def committed(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def test_a_recreated_topic_is_read_from_its_start_not_from_the_old_offsets(node: LocalCluster) -> None:
    client = {"bootstrap.servers": node.bootstrap}
    create_topic(node.bootstrap, TOPIC)
    create_topic(node.bootstrap, "other")
    produce_values(client, TOPIC, [b"old-%d" % i for i in range(10)])
    produce_values(client, "other", [b"other"])
    assert len(consume_values(client, TOPIC, 10, "app")) == 10
    assert len(consume_values(client, "other", 1, "app")) == 1
    assert committed(node.bootstrap, "app") == {(TOPIC, 0): 10, ("other", 0): 1}

    kmirror("topics", "--bootstrap-server", node.bootstrap, "--delete", "--topic", TOPIC)
    wait_until(lambda: committed(node.bootstrap, "app") == {("other", 0): 1}, "the deleted topic's offsets gone",
               seen=lambda: committed(node.bootstrap, "app"))
    create_topic(node.bootstrap, TOPIC)
    new = [b"new-%d" % i for i in range(15)]
    produce_values(client, TOPIC, new)
    assert consume_values(client, TOPIC, 15, "app") == new


def test_a_transactions_offsets_of_a_topic_deleted_before_its_commit_stay_gone_after_a_restart(
    node: LocalCluster,
) -> None:
    create_topic(node.bootstrap, TOPIC)
    create_topic(node.bootstrap, "other")
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "txn-app"})
    producer = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "offsets-of-a-deleted-topic"})
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("other", b"in the transaction")
        producer.send_offsets_to_transaction([TopicPartition(TOPIC, 0, 10), TopicPartition("other", 0, 1)],
                                             consumer.consumer_group_metadata(), 30)
        kmirror("topics", "--bootstrap-server", node.bootstrap, "--delete", "--topic", TOPIC)
        wait_until(lambda: TOPIC not in AdminClient({"bootstrap.servers": node.bootstrap}).list_topics(
            timeout=10).topics, "the topic deleted")
        producer.commit_transaction(30)
    finally:
        consumer.close()
    assert committed(node.bootstrap, "txn-app") == {("other", 0): 1}
    node.kill9()
    node.start_node(1)  # loads __consumer_offsets from its log again
    wait_until(lambda: committed(node.bootstrap, "txn-app") == {("other", 0): 1}, "the offsets reloaded",
               seen=lambda: committed(node.bootstrap, "txn-app"), retry_on=(KafkaException,))
