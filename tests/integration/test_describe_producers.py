"""DescribeProducers (KIP-664) on a real node, asked by kafka-python's admin client: the
producers an idempotent and a transactional confluent-kafka producer leave in a partition,
with the open transaction's start offset, and Kafka's errors for partitions not hosted."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTP
from kafka.errors import UnknownTopicOrPartitionError

from kmirror.testing.kafka_clients import create_topic, idempotent_and_open_transaction

pytestmark = pytest.mark.integration


def test_describe_producers_shows_idempotent_and_transactional_producers(cluster):
    b = cluster.bootstrap
    create_topic(b, "pids", 1)
    _, txn = idempotent_and_open_transaction(b, "pids", "describe-me", 3)

    admin = KafkaAdminClient(bootstrap_servers=b)
    try:
        state = admin.describe_producers([KTP("pids", 0)])[KTP("pids", 0)]
        producers = sorted(state.active_producers, key=lambda p: p.current_transaction_start_offset)
        assert len(producers) == 2
        plain, open_txn = producers
        assert plain.current_transaction_start_offset == -1 and plain.last_sequence == 4
        assert plain.producer_epoch == 0 and plain.last_timestamp > 0
        assert open_txn.current_transaction_start_offset == 5 and open_txn.last_sequence == 2
        assert open_txn.producer_id != plain.producer_id

        txn.commit_transaction(30)
        state = admin.describe_producers([KTP("pids", 0)])[KTP("pids", 0)]
        committed = next(p for p in state.active_producers if p.producer_id == open_txn.producer_id)
        assert committed.current_transaction_start_offset == -1 and committed.coordinator_epoch >= 0

        with pytest.raises(UnknownTopicOrPartitionError):
            admin.describe_producers([KTP("pids", 7)], broker_id=1)
    finally:
        admin.close()
