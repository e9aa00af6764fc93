"""The first group request to a fresh node: FindCoordinator creates `__consumer_offsets`, and
its answer waits for this node to load the group's partition instead of answering
COORDINATOR_NOT_AVAILABLE meanwhile. librdkafka retries that answer only twice, 100 ms apart,
and then waits for a broker state change: its admin request would hang for its whole timeout."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from kmirror.testing.processes import LocalCluster

pytestmark = pytest.mark.integration


def test_list_consumer_group_offsets_on_a_fresh_node_is_answered_once_the_partition_is_loaded(
    cluster: LocalCluster,
) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    request = ConsumerGroupTopicPartitions("fresh-group", [TopicPartition("orders", 0)])
    started = time.monotonic()
    result = admin.list_consumer_group_offsets([request], request_timeout=30)["fresh-group"].result(30)
    # well under the request timeout the client would wait out after three refusals
    assert time.monotonic() - started < 15
    assert [(tp.topic, tp.partition, tp.offset) for tp in result.topic_partitions] == [("orders", 0, -1001)]
