"""DescribeQuorum (key 55, v0-2; KIP-595, KIP-836, KIP-853): the metadata log's quorum as
kafka-metadata-quorum.sh shows it.

The active controller answers: it is the leader; the voters are itself and, with several
(KIP-595), the others with the log end offset and time of their latest fetch; the brokers
replicating its log are observers, each with the offset of its latest metadata fetch and when
it last reached the high watermark (`metadata.quorum_state`). A voter that is not the active
controller closes the connection (NOT_CONTROLLER): a broker forwarding the request, as Kafka's
brokers do, goes on to the next voter. Directory ids are
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
from kmirror.metadata.controller.result import NotControllerError
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

    if not controller.active:
        raise NotControllerError(f"DescribeQuorum: {controller.config.node_id} is not the active controller")
    leader_id = controller.controller_id
    observers = controller.observers.current(now, leader_id)
    voters = [state(leader_id, end, now, now)]
    quorum = controller.quorum
    if quorum is not None:
        mono = services.clock.monotonic_ms()
        for v, (offset, fetched_mono) in sorted(quorum.voter_end_offsets().items()):
            fetched = -1 if fetched_mono < 0 else now - (mono - fetched_mono)
            if v != leader_id:
                voters.append(state(v, max(offset, -1), fetched, fetched if offset >= end else -1))
    partition = build(
        nested(rt, "PartitionData"), partition_index=i32(0), error_code=ErrorCode.none, error_message=None,
        leader_id=i32(leader_id), leader_epoch=i32(0 if quorum is None else quorum.epoch),
        high_watermark=i64(controller.high_watermark), current_voters=tuple(voters),
        observers=tuple(state(node_id, s.log_end_offset, s.last_fetch_ms, s.last_caught_up_ms)
                        for node_id, s in observers.items()),
    )
    config = controller.config
    listener_name = config.controller_listener_names[0]
    endpoints = {v.node_id: (v.host, v.port) for v in config.controller_quorum_voters}
    for lst in config.listeners:
        if lst.name in config.controller_listener_names:
            endpoints[leader_id] = (lst.host, lst.port)
    nodes = tuple(build(nested(rt, "Node"), node_id=i32(node_id),
                        listeners=(build(nested(rt, "Listener"), name=listener_name, host=host, port=u16(port)),))
                  for node_id, (host, port) in sorted(endpoints.items()))
    return build(rt, error_code=ErrorCode.none, error_message=None,
                 topics=(build(nested(rt, "TopicData"), topic_name=METADATA_TOPIC, partitions=(partition,)),),
                 nodes=nodes)
