"""DescribeProducers (key 61, v0; KIP-664): the active producers of partitions this broker
hosts (leader or follower, as Kafka), as `kafka-transactions.sh describe-producers` shows them."""

from __future__ import annotations

import datetime
from typing import Any

from kio.static.primitive import i32, i64

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import READ, TOPIC
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.replication.outcomes import PartitionError
from kmirror.replication.producer_states import active_producers
from kmirror.types import TopicPartition


@api(61, "DescribeProducers", 0, 0)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    topic_cls, part_cls, state_cls = nested(rt, "TopicResponse"), nested(rt, "PartitionResponse"), nested(rt, "ProducerState")
    topics = []
    # Kafka: READ on each topic, else TOPIC_AUTHORIZATION_FAILED
    readable = services.authorization.filter(ctx, READ, TOPIC, (t.name for t in request.topics))
    for topic in request.topics:
        partitions = []
        for index in topic.partition_indexes:
            found = (active_producers(services.replica_manager, TopicPartition(topic.name, int(index)))
                     if topic.name in readable else PartitionError(ErrorCode.topic_authorization_failed))
            if isinstance(found, PartitionError):
                partitions.append(build(part_cls, partition_index=i32(index), error_code=found.code,
                                        error_message=found.message, active_producers=()))
                continue
            partitions.append(build(part_cls, partition_index=i32(index), error_code=ErrorCode.none, error_message=None,
                                    active_producers=tuple(build(
                                        state_cls, producer_id=i64(p.producer_id), producer_epoch=i32(p.producer_epoch),
                                        last_sequence=i32(p.last_sequence), last_timestamp=i64(p.last_timestamp),
                                        coordinator_epoch=i32(p.coordinator_epoch),
                                        current_txn_start_offset=i64(p.current_txn_start_offset))
                                        for p in found)))
        topics.append(build(topic_cls, name=topic.name, partitions=tuple(partitions)))
    return build(rt, throttle_time=datetime.timedelta(0), topics=tuple(topics))
