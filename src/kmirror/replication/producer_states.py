"""DescribeProducers on a hosted replica (Kafka `ReplicaManager.activeProducerState` and
`UnifiedLog.activeProducers`): the producer state the local log keeps, leader or follower, as
Kafka answers from any replica it hosts. A partition not hosted here is NOT_LEADER_OR_FOLLOWER
when the topic has it, else UNKNOWN_TOPIC_OR_PARTITION."""

from __future__ import annotations

from dataclasses import dataclass

from kmirror.protocol.errors import ErrorCode
from kmirror.replication.outcomes import PartitionError
from kmirror.replication.replica_manager import ReplicaManager
from kmirror.types import TopicPartition


@dataclass(frozen=True, slots=True)
class ActiveProducer:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int
    """-1 when the producer has no open transaction."""


def active_producers(replica_manager: ReplicaManager, tp: TopicPartition) -> list[ActiveProducer] | PartitionError:
    partition = replica_manager.get_partition(tp)
    if partition is None:
        image = replica_manager.image
        topic = None if image is None else image.topics.get(tp.topic)
        known = topic is not None and tp.partition in topic.partitions
        return PartitionError(ErrorCode.not_leader_or_follower if known else ErrorCode.unknown_topic_or_partition)
    return [
        ActiveProducer(
            e.producer_id, e.producer_epoch, e.last_seq, e.last_timestamp, e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
        )
        for e in sorted(partition.log.active_producers(), key=lambda e: e.producer_id)
    ]
