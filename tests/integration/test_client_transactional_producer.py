"""kmirror's own transactional producer (`kmirror.client.transactional_producer`) against a
real kmirror node, checked with confluent-kafka consumers and group offset reads.

Proven: committed records are visible under read_committed and aborted ones are not; a
second producer of the same transactional.id fences the first (its commit fails with
PRODUCER_FENCED / INVALID_PRODUCER_EPOCH) and aborts its open transaction; offsets sent to
the transaction are visible to a stable OffsetFetch only after the commit."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTopicPartition

from kmirror.client.cluster import Cluster
from kmirror.client.errors import KafkaError
from kmirror.client.groups import GroupAdmin, OffsetAndMetadata
from kmirror.client.transactional_producer import TransactionalProducer
from kmirror.records.builder import SimpleRecord
from kmirror.testing.kafka_clients import create_topic
from kmirror.testing.processes import LocalCluster
from kmirror.types import TopicPartition

pytestmark = pytest.mark.integration


def read_values(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4()}",
                         "isolation.level": isolation, "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([CTopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    while True:
        msg = consumer.poll(10)
        assert msg is not None, "no end of partition within 10 s"
        if msg.error() is not None:
            break  # partition EOF
        out.append(msg.value())
    consumer.close()
    return out


class Groups(GroupAdmin):
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster


def records(*values: bytes) -> list[SimpleRecord]:
    return [SimpleRecord(None, v) for v in values]


def test_commit_abort_fencing_and_offsets(module_node: LocalCluster) -> None:
    topic = f"txp-{uuid.uuid4().hex[:6]}"
    create_topic(module_node.bootstrap, topic, 1)
    tp = TopicPartition(topic, 0)
    txn_id = f"txp-{uuid.uuid4().hex[:6]}"
    group = f"txp-group-{uuid.uuid4().hex[:6]}"

    async def scenario() -> None:
        cluster = Cluster(module_node.bootstrap)
        producer = TransactionalProducer(cluster, txn_id)
        await producer.init_transactions()
        producer.begin_transaction()
        await producer.send({tp: records(b"c1", b"c2")})
        await producer.send_offsets_to_transaction({tp: OffsetAndMetadata(7, metadata="m")}, group)
        groups = Groups(cluster)
        assert await groups.list_consumer_group_offsets(group) == {}  # pending until the commit marker
        await producer.commit_transaction()
        assert await groups.list_consumer_group_offsets(group, require_stable=True) == {
            tp: OffsetAndMetadata(7, -1, "m")}
        producer.begin_transaction()
        await producer.send_offsets_to_transaction({tp: OffsetAndMetadata(9)}, group)
        with pytest.raises(KafkaError) as info:  # a stable read of a partition with a pending commit
            await groups.list_consumer_group_offsets(group, require_stable=True, timeout_ms=300)
        assert info.value.error_name == "UNSTABLE_OFFSET_COMMIT"
        assert await groups.list_consumer_group_offsets(group) == {tp: OffsetAndMetadata(7, -1, "m")}
        await producer.commit_transaction()
        assert await groups.list_consumer_group_offsets(group, require_stable=True) == {tp: OffsetAndMetadata(9)}

        producer.begin_transaction()
        await producer.send({tp: records(b"a1")})
        await producer.abort_transaction()

        producer.begin_transaction()
        await producer.send({tp: records(b"z1")})  # left open: the next producer of the id aborts it
        successor = TransactionalProducer(Cluster(module_node.bootstrap), txn_id)
        await successor.init_transactions()
        assert successor.producer_epoch > producer.producer_epoch
        with pytest.raises(KafkaError) as fenced:
            await producer.commit_transaction()
        assert fenced.value.error_name in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
        successor.begin_transaction()
        await successor.send({tp: records(b"c3")})
        await successor.commit_transaction()
        await successor.cluster.close()
        await cluster.close()

    asyncio.run(scenario())
    assert read_values(module_node.bootstrap, topic, "read_committed") == [b"c1", b"c2", b"c3"]
    assert read_values(module_node.bootstrap, topic, "read_uncommitted") == [b"c1", b"c2", b"a1", b"z1", b"c3"]
