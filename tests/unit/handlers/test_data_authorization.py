"""Authorization of the data APIs (Produce, Fetch, ListOffsets, OffsetForLeaderEpoch), as
Kafka's KafkaApis, with the authorizer on."""

from __future__ import annotations

import datetime
import logging
from types import SimpleNamespace
from typing import Any
from uuid import UUID, uuid4

import pytest

from kmirror.broker.authorizer_audit import AUDIT_LOGGER
from kmirror.broker.handlers import (
    add_partitions_to_txn,
    delete_records,
    describe_producers,
    describe_transactions,
    fetch,
    list_offsets,
    list_transactions,
    offsets_for_leader_epoch,
    produce,
    txn_offset_commit,
    write_txn_markers,
)
from kmirror.broker.handlers import init_producer_id as init_producer_id_handler
from kmirror.coordinator.transaction.results import ListedTransaction
from kmirror.metadata.controller.acls import AclOperation as Op
from kmirror.metadata.controller.acls import ResourceType as Res
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.records.builder import build_batch
from kmirror.testing.authorization import CLUSTER_LISTENER, binding, static_authorizer
from kmirror.testing.replication import call_handler, data_services, request_type, single_node_image
from kmirror.types import TopicPartition

BATCH = build_batch([(b"k", b"v", (), 1_700_000_000_000)])
DENIED = ErrorCode.topic_authorization_failed
A_ID, B_ID = uuid4(), uuid4()


def services(*bindings: Any) -> Any:
    s = data_services(single_node_image(1, {"a": (A_ID, 1), "b": (B_ID, 1)}))
    s.authorization = static_authorizer(*bindings)
    return s


def produce_request(topics: tuple[str, ...], transactional_id: str | None = None, version: int = 9) -> Any:
    rt = request_type(0, version)
    TopicData, PartitionData = nested(rt, "TopicProduceData"), nested(rt, "PartitionProduceData")
    return build(rt, transactional_id=transactional_id, acks=1, timeout=datetime.timedelta(seconds=30),
                 topic_data=tuple(build(TopicData, name=t, partition_data=(PartitionData(index=0, records=BATCH),))
                                  for t in topics))


def produced(s: Any, *topics: str, principal: str = "alice", listener: str = "PLAINTEXT", **kw: Any) -> dict[str, int]:
    resp = call_handler(produce.handle, s, 0, 9, produce_request(topics, **kw), principal, listener)
    return {t.name: int(t.partition_responses[0].error_code) for t in resp.responses}


def test_produce_needs_write_on_each_topic() -> None:
    s = services(binding(Res.TOPIC, "a", Op.WRITE), binding(Res.TOPIC, "b", Op.READ))
    assert produced(s, "a", "b") == {"a": 0, "b": DENIED}
    assert s.replica_manager.get_partition(TopicPartition("b", 0)).log.log_end_offset == 0
    assert produced(s, "a", "b", principal="bob") == {"a": DENIED, "b": DENIED}
    assert produced(s, "a", "b", principal="admin") == {"a": 0, "b": 0}  # super user
    assert produced(s, "a", "b", principal="bob", listener=CLUSTER_LISTENER) == {"a": 0, "b": 0}


def test_produce_deny_wins_and_prefixed_allows() -> None:
    s = services(binding(Res.TOPIC, "a", Op.WRITE, pattern=4),  # PREFIXED
                 binding(Res.TOPIC, "*", Op.WRITE, principal="User:*"),
                 binding(Res.TOPIC, "b", Op.WRITE, deny=True))
    assert produced(s, "a", "b") == {"a": 0, "b": DENIED}
    assert produced(s, "a", "b", principal="bob") == {"a": 0, "b": 0}


def test_transactional_produce_needs_write_on_the_transactional_id() -> None:
    s = services(binding(Res.TOPIC, "a", Op.WRITE))
    refused = ErrorCode.transactional_id_authorization_failed
    assert produced(s, "a", transactional_id="tx") == {"a": refused}
    s = services(binding(Res.TOPIC, "a", Op.WRITE), binding(Res.TRANSACTIONAL_ID, "tx", Op.WRITE))
    assert produced(s, "a", transactional_id="tx") != {"a": refused}


def test_a_refused_produce_names_the_topic_once_per_partition(caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's resourceRefCount: a Produce to two partitions of a topic names it twice."""
    s = services()
    rt = request_type(0, 9)
    TopicData, PartitionData = nested(rt, "TopicProduceData"), nested(rt, "PartitionProduceData")
    request = build(rt, transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=30), topic_data=(
        build(TopicData, name="b", partition_data=tuple(PartitionData(index=i, records=BATCH) for i in (0, 1))),))
    caplog.set_level(logging.INFO, logger=AUDIT_LOGGER)
    call_handler(produce.handle, s, 0, 9, request, "alice")
    (line,) = [r.getMessage() for r in caplog.records if r.name == AUDIT_LOGGER]
    assert line == ("Principal = User:alice is Denied operation = WRITE from host = 127.0.0.1 on resource = "
                    "Topic:LITERAL:b for request = Produce with resourceRefCount = 2 based on rule DefaultDeny")


def fetch_request(topics: dict[str | UUID, int], replica_id: int = -1, version: int = 12) -> Any:
    rt = request_type(1, version)
    FetchTopic, FetchPartition = nested(rt, "FetchTopic"), nested(rt, "FetchPartition")
    return build(rt, replica_id=replica_id, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                 isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
                 topics=tuple(build(FetchTopic, topic=t if isinstance(t, str) else "",
                                    topic_id=t if isinstance(t, UUID) else UUID(int=0),
                                    partitions=(build(FetchPartition, partition=0, fetch_offset=off,
                                                      partition_max_bytes=1 << 20, current_leader_epoch=-1),))
                              for t, off in topics.items()))


def fetched(s: Any, request: Any, principal: str = "alice", version: int = 12) -> dict[Any, tuple[int, bytes]]:
    resp = call_handler(fetch.handle, s, 1, version, request, principal)
    return {t.topic_id if version >= 13 else t.topic: (int(t.partitions[0].error_code), bytes(t.partitions[0].records))
            for t in resp.responses}


def test_consumer_fetch_needs_read_on_each_topic() -> None:
    s = services(binding(Res.TOPIC, "a", Op.READ), binding(Res.TOPIC, "b", Op.DESCRIBE))
    s.replica_manager.append_records({TopicPartition("a", 0): BATCH, TopicPartition("b", 0): BATCH}, 1)
    answer = fetched(s, fetch_request({"a": 0, "b": 0}))
    assert answer["a"][0] == 0 and answer["a"][1] != b""
    assert answer["b"] == (DENIED, b"")
    by_id = fetched(s, fetch_request({A_ID: 0, B_ID: 0}, version=13), version=13)
    assert by_id[A_ID][0] == 0 and by_id[B_ID] == (DENIED, b"")


def test_follower_fetch_needs_cluster_action() -> None:
    s = services(binding(Res.TOPIC, "*", Op.ALL))
    assert fetched(s, fetch_request({"a": 0}, replica_id=2)) == {"a": (DENIED, b"")}
    s = services(binding(Res.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION))
    assert fetched(s, fetch_request({"a": 0}, replica_id=2))["a"][0] != DENIED


def test_list_offsets_needs_describe_on_the_topic() -> None:
    s = services(binding(Res.TOPIC, "a", Op.READ))  # READ implies DESCRIBE
    rt = request_type(2, 7)
    Topic, Partition = nested(rt, "ListOffsetsTopic"), nested(rt, "ListOffsetsPartition")
    request = build(rt, replica_id=-1, isolation_level=0, topics=tuple(
        Topic(name=n, partitions=(build(Partition, partition_index=0, timestamp=-1, current_leader_epoch=-1),))
        for n in ("a", "b")))
    resp = call_handler(list_offsets.handle, s, 2, 7, request, "alice")
    assert {t.name: t.partitions[0].error_code for t in resp.topics} == {"a": 0, "b": DENIED}


def test_offsets_for_leader_epoch_needs_describe_or_cluster_action() -> None:
    rt = request_type(23, 4)
    Topic, Partition = nested(rt, "OffsetForLeaderTopic"), nested(rt, "OffsetForLeaderPartition")
    request = build(rt, replica_id=-1, topics=tuple(
        Topic(topic=n, partitions=(Partition(partition=0, current_leader_epoch=-1, leader_epoch=0),))
        for n in ("a", "b")))

    def answer(s: Any) -> dict[str, int]:
        resp = call_handler(offsets_for_leader_epoch.handle, s, 23, 4, request, "alice")
        return {t.topic: int(t.partitions[0].error_code) for t in resp.topics}

    assert answer(services(binding(Res.TOPIC, "b", Op.DESCRIBE))) == {"a": DENIED, "b": 0}
    assert answer(services(binding(Res.CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION))) == {"a": 0, "b": 0}


def init_producer_id(s: Any, transactional_id: str | None, principal: str = "alice") -> int:
    request = build(request_type(22, 4), transactional_id=transactional_id,
                    transaction_timeout=datetime.timedelta(seconds=60), producer_id=-1, producer_epoch=-1)
    return int(call_handler(init_producer_id_handler.handle, s, 22, 4, request, principal).error_code)


def test_init_producer_id_needs_idempotent_write_or_a_writable_topic_or_the_transactional_id() -> None:
    refused = ErrorCode.cluster_authorization_failed
    assert init_producer_id(services(binding(Res.TOPIC, "a", Op.READ)), None) == refused
    # KIP-679: WRITE on any topic, or IDEMPOTENT_WRITE on the cluster, lets an idempotent producer in
    # (the fake services have no metadata: past authorization the answer is COORDINATOR_NOT_AVAILABLE)
    past = ErrorCode.coordinator_not_available
    assert init_producer_id(services(binding(Res.TOPIC, "a", Op.WRITE)), None) == past
    assert init_producer_id(services(binding(Res.CLUSTER, "kafka-cluster", Op.IDEMPOTENT_WRITE)), None) == past
    assert init_producer_id(services(binding(Res.TOPIC, "a", Op.WRITE), binding(Res.TOPIC, "*", Op.WRITE, deny=True)),
                            None) == refused
    assert init_producer_id(services(binding(Res.TOPIC, "*", Op.WRITE)), "tx") == \
        ErrorCode.transactional_id_authorization_failed
    assert init_producer_id(services(binding(Res.TRANSACTIONAL_ID, "tx", Op.WRITE)), "tx") == past


def test_delete_records_and_describe_producers_per_topic() -> None:
    s = services(binding(Res.TOPIC, "a", Op.DELETE), binding(Res.TOPIC, "b", Op.READ))
    rt = request_type(21, 2)
    Topic, Partition = nested(rt, "DeleteRecordsTopic"), nested(rt, "DeleteRecordsPartition")
    request = build(rt, timeout=datetime.timedelta(seconds=1), topics=tuple(
        Topic(name=n, partitions=(Partition(partition_index=0, offset=0),)) for n in ("a", "b")))
    resp = call_handler(delete_records.handle, s, 21, 2, request, "alice")
    assert {t.name: t.partitions[0].error_code for t in resp.topics} == {"a": 0, "b": DENIED}
    rt = request_type(61, 0)
    request = build(rt, topics=tuple(nested(rt, "TopicRequest")(name=n, partition_indexes=(0,)) for n in ("a", "b")))
    resp = call_handler(describe_producers.handle, s, 61, 0, request, "alice")
    assert {t.name: t.partitions[0].error_code for t in resp.topics} == {"a": DENIED, "b": 0}


def test_write_txn_markers_needs_cluster_action() -> None:
    rt = request_type(27, 1)
    marker = nested(rt, "WritableTxnMarker")(producer_id=1, producer_epoch=0, transaction_result=True, topics=(
        nested(rt, "WritableTxnMarkerTopic")(name="a", partition_indexes=(0,)),), coordinator_epoch=0)
    request = build(rt, markers=(marker,))
    resp = call_handler(write_txn_markers.handle, services(binding(Res.TOPIC, "*", Op.ALL)), 27, 1, request, "alice")
    assert resp.markers[0].topics[0].partitions[0].error_code == ErrorCode.cluster_authorization_failed


def test_add_partitions_to_txn_per_transactional_id_and_topic() -> None:
    rt = request_type(24, 3)
    Topic = nested(rt, "AddPartitionsToTxnTopic")
    request = build(rt, v3_and_below_transactional_id="tx", v3_and_below_producer_id=1,
                    v3_and_below_producer_epoch=0,
                    v3_and_below_topics=tuple(Topic(name=n, partitions=(0,)) for n in ("a", "b")))

    def answer(s: Any) -> dict[str, int]:
        resp = call_handler(add_partitions_to_txn.handle, s, 24, 3, request, "alice")
        return {t.name: int(t.results_by_partition[0].partition_error_code)
                for t in resp.results_by_topic_v3_and_below}

    tx_refused = ErrorCode.transactional_id_authorization_failed
    assert answer(services(binding(Res.TOPIC, "*", Op.WRITE))) == {"a": tx_refused, "b": tx_refused}
    assert answer(services(binding(Res.TRANSACTIONAL_ID, "tx", Op.WRITE), binding(Res.TOPIC, "a", Op.WRITE))) == {
        "a": ErrorCode.operation_not_attempted, "b": DENIED}
    v4 = request_type(24, 4)
    resp = call_handler(add_partitions_to_txn.handle, services(), 24, 4, build(v4, transactions=()), "alice")
    assert resp.error_code == ErrorCode.cluster_authorization_failed


def test_txn_offset_commit_needs_the_transactional_id_and_the_group() -> None:
    rt = request_type(28, 3)
    Topic, Partition = nested(rt, "TxnOffsetCommitRequestTopic"), nested(rt, "TxnOffsetCommitRequestPartition")
    request = build(rt, transactional_id="tx", group_id="g", producer_id=1, producer_epoch=0, generation_id=-1,
                    member_id="", group_instance_id=None, topics=(Topic(name="a", partitions=(
                        build(Partition, partition_index=0, committed_offset=1, committed_leader_epoch=-1,
                              committed_metadata=""),)),))

    def answer(s: Any) -> int:
        resp = call_handler(txn_offset_commit.handle, s, 28, 3, request, "alice")
        return int(resp.topics[0].partitions[0].error_code)

    assert answer(services(binding(Res.GROUP, "g", Op.READ))) == ErrorCode.transactional_id_authorization_failed
    assert answer(services(binding(Res.TRANSACTIONAL_ID, "tx", Op.WRITE))) == ErrorCode.group_authorization_failed


def test_describe_and_list_transactions_per_transactional_id() -> None:
    s = services(binding(Res.TRANSACTIONAL_ID, "tx1", Op.DESCRIBE))
    resp = call_handler(describe_transactions.handle, s, 65, 0,
                        build(request_type(65, 0), transactional_ids=("tx1", "tx2")), "alice")
    assert {t.transactional_id: t.error_code for t in resp.transaction_states} == {
        "tx1": ErrorCode.coordinator_not_available, "tx2": ErrorCode.transactional_id_authorization_failed}
    listed = [ListedTransaction("tx1", 1, "Ongoing"), ListedTransaction("tx2", 2, "Ongoing")]
    s.transaction_coordinator = SimpleNamespace(list_transactions=lambda *args: (listed, ()))
    request = build(request_type(66, 1), state_filters=(), producer_id_filters=(), duration_filter=-1)
    resp = call_handler(list_transactions.handle, s, 66, 1, request, "alice")
    assert [t.transactional_id for t in resp.transaction_states] == ["tx1"]
    resp = call_handler(list_transactions.handle, s, 66, 1, request, "admin")
    assert [t.transactional_id for t in resp.transaction_states] == ["tx1", "tx2"]
