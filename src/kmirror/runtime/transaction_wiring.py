"""The transaction coordinator's adapters on a node (composition only).

- `TxnMarkerWriter`: the `MarkerWriter` port. Markers for partitions this node leads are
  written in-process; the others go to their leader as WriteTxnMarkers over the
  inter-broker listener.
- `TxnVerifier`: KIP-890 part 1 verification sent to the coordinator of another broker.
- `leader_lookup` / `coordinator_epoch_lookup`: what the marker channel and the core read
  from the metadata image and the replica manager.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from kio.schema.add_partitions_to_txn.v4 import request as add_partitions_to_txn_v4
from kio.schema.add_partitions_to_txn.v4 import response as add_partitions_to_txn_v4_response
from kio.schema.write_txn_markers.v1 import request as write_txn_markers_v1
from kio.schema.write_txn_markers.v1 import response as write_txn_markers_v1_response

from kmirror.broker.services import BrokerServices
from kmirror.broker.txn_markers import MarkerEntry, write_txn_markers
from kmirror.coordinator.transaction.results import TxnMarker
from kmirror.coordinator.transaction.service import TOPIC_DELETED
from kmirror.metadata.image import MetadataImage
from kmirror.protocol.entities import build
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.types import TopicPartition


class MarkerSender(Protocol):
    """WriteTxnMarkers to broker `node_id` (`runtime.broker_sender.ListenerBrokerSender`)."""

    async def __call__(self, node_id: int, request: write_txn_markers_v1.WriteTxnMarkersRequest,
                       ) -> write_txn_markers_v1_response.WriteTxnMarkersResponse: ...


class VerificationSender(Protocol):
    """AddPartitionsToTxn to broker `node_id` (`runtime.broker_sender.ListenerBrokerSender`)."""

    async def __call__(self, node_id: int, request: add_partitions_to_txn_v4.AddPartitionsToTxnRequest,
                       ) -> add_partitions_to_txn_v4_response.AddPartitionsToTxnResponse: ...


class MetadataView(Protocol):
    """The node's metadata service, as the marker channel reads it."""

    @property
    def image(self) -> MetadataImage: ...


class TxnMarkerWriter:
    def __init__(self, node_id: int, services: Callable[[], BrokerServices | None], send: MarkerSender) -> None:
        self.node_id = node_id
        self._services = services
        self._send = send

    async def __call__(self, leader: int, marker: TxnMarker,
                       partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        entry = MarkerEntry(marker.producer_id, marker.producer_epoch, marker.commit, marker.coordinator_epoch,
                            tuple(partitions))
        if leader == self.node_id:
            services = self._services()
            if services is None:
                return {}
            [written] = await write_txn_markers(services, [entry])
            return written
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        m = write_txn_markers_v1
        topics = tuple(build(m.WritableTxnMarkerTopic, name=t, partition_indexes=tuple(ps))
                       for t, ps in by_topic.items())
        request = build(m.WriteTxnMarkersRequest, markers=(build(
            m.WritableTxnMarker, producer_id=marker.producer_id, producer_epoch=marker.producer_epoch,
            transaction_result=marker.commit, topics=topics, coordinator_epoch=marker.coordinator_epoch),))
        response = await self._send(leader, request)
        errors: dict[TopicPartition, ErrorCode] = {}
        for result in response.markers:
            for topic in result.topics:
                for p in topic.partitions:
                    errors[TopicPartition(topic.name, int(p.partition_index))] = ErrorCode(p.error_code)
        return errors


class TxnVerifier:
    """The `RemoteVerifier` port: AddPartitionsToTxn v4 `verify_only` to the coordinator."""

    def __init__(self, send: VerificationSender) -> None:
        self._send = send

    async def __call__(self, node_id: int, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        m = add_partitions_to_txn_v4
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = build(m.AddPartitionsToTxnRequest, transactions=(build(
            m.AddPartitionsToTxnTransaction, transactional_id=transactional_id, producer_id=producer_id,
            producer_epoch=producer_epoch, verify_only=True, topics=tuple(
                build(m.AddPartitionsToTxnTopic, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())),))
        response = await self._send(node_id, request)
        answers: dict[TopicPartition, ErrorCode] = {}
        for result in response.results_by_transaction:
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    answers[TopicPartition(topic.name, int(p.partition_index))] = ErrorCode(p.partition_error_code)
        if response.error_code != ErrorCode.none:
            return dict.fromkeys(partitions, ErrorCode(response.error_code))
        return answers


def leader_lookup(metadata: MetadataView) -> Callable[[TopicPartition], int | None]:
    def leader_of(tp: TopicPartition) -> int | None:
        topic = metadata.image.topics.get(tp.topic)
        registration = None if topic is None else topic.partitions.get(tp.partition)
        if registration is None:
            return TOPIC_DELETED
        return None if registration.leader < 0 else int(registration.leader)

    return leader_of


def coordinator_epoch_lookup(replica_manager: ReplicaManager, topic: str) -> Callable[[int], int]:
    def epoch_of(partition: int) -> int:
        _leader, leader_epoch = replica_manager.current_leader(TopicPartition(topic, partition))
        return int(leader_epoch)

    return epoch_of
