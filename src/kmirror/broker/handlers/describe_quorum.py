"""DescribeQuorum (key 55, v0-2; KIP-595, KIP-836, KIP-853): the metadata log's quorum as
kafka-metadata-quorum.sh shows it.

The active controller answers: it is the leader and the only voter (epoch 0: one controller,
no elections), and the brokers replicating its log are observers, each with the offset of its
latest metadata fetch and when it last reached the log end (`metadata.quorum_state`). A
broker forwards the request to the controller, as Kafka's brokers do. Directory ids are
Kafka's zero uuid: kmirror's controller does not track its nodes' log directories (KIP-858).
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64, u16

from kmirror.broker.api import RequestContext, api
from kmirror.broker.handlers.controller_metadata_fetch import METADATA_TOPIC
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested

ZERO_DIRECTORY_ID = uuid.UUID(int=0)


@api(55, "DescribeQuorum", 0, 2, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    if services.metadata.forwarding:  # a broker-only node: the controller answers
        return await services.broker_metadata.forward(request, catch_up=False)
    rt = ctx.response_type
    asked = [(t.topic_name, int(p.partition_index)) for t in request.topics for p in t.partitions]
    if asked != [(METADATA_TOPIC, 0)]:
        return build(rt, error_code=ErrorCode.unknown_topic_or_partition,
                     error_message=f"Only {METADATA_TOPIC}-0 has a quorum", topics=(), nodes=())
    controller = services.controller_metadata
    now = services.clock.now_ms()
    end = controller.log_end_offset
    State = nested(rt, "ReplicaState")

    def state(node_id: int, log_end_offset: int, last_fetch_ms: int, last_caught_up_ms: int) -> Any:
        return build(State, replica_id=i32(node_id), replica_directory_id=ZERO_DIRECTORY_ID,
                     log_end_offset=i64(log_end_offset), last_fetch_timestamp=i64(last_fetch_ms),
                     last_caught_up_timestamp=i64(last_caught_up_ms))

    leader_id = controller.controller_id
    observers = controller.observers.current(now, leader_id)
    partition = build(
        nested(rt, "PartitionData"), partition_index=i32(0), error_code=ErrorCode.none, error_message=None,
        leader_id=i32(leader_id), leader_epoch=i32(0), high_watermark=i64(end),
        current_voters=(state(leader_id, end, now, now),),
        observers=tuple(state(node_id, s.log_end_offset, s.last_fetch_ms, s.last_caught_up_ms)
                        for node_id, s in observers.items()),
    )
    config = controller.config
    listeners = tuple(
        build(nested(rt, "Listener"), name=lst.name, host=lst.host, port=u16(lst.port))
        for lst in config.listeners if lst.name in config.controller_listener_names
    )
    return build(rt, error_code=ErrorCode.none, error_message=None,
                 topics=(build(nested(rt, "TopicData"), topic_name=METADATA_TOPIC, partitions=(partition,)),),
                 nodes=(build(nested(rt, "Node"), node_id=i32(leader_id), listeners=listeners),))
