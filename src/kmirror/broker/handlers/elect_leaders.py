"""ElectLeaders (key 43, v0-2; KIP-460 election types PREFERRED=0, UNCLEAN=1). Brokers without
the controller role forward the request to the active controller, as Kafka does."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from kmirror.broker.api import RequestContext, api
from kmirror.broker.authorization import ALTER
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested


@api(43, "ElectLeaders", 0, 2, planes=("broker", "controller"))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    metadata = services.metadata
    if not services.authorization.authorize_cluster(ctx, ALTER):  # Kafka: ALTER on the cluster
        rt = ctx.response_type
        part_cls, topic_cls = nested(rt, "PartitionResult"), nested(rt, "ReplicaElectionResult")
        refused = ErrorCode.cluster_authorization_failed
        return build(rt, throttle_time=datetime.timedelta(0), error_code=refused, replica_election_results=tuple(
            build(topic_cls, topic=t.topic, partition_result=tuple(
                build(part_cls, partition_id=i32(p), error_code=refused, error_message="Cluster authorization failed.")
                for p in t.partitions))
            for t in request.topic_partitions or ()))
    if metadata.forwarding:
        return await metadata.forward(request)
    election_type = int(getattr(request, "election_type", 0))
    partitions = None
    if request.topic_partitions is not None:
        partitions = {t.topic: [int(p) for p in t.partitions] for t in request.topic_partitions}
    results = await metadata.elect_leaders(election_type, partitions)
    rt = ctx.response_type
    part_cls = nested(rt, "PartitionResult")
    topic_cls = nested(rt, "ReplicaElectionResult")
    by_topic: dict[str, list[Any]] = {}
    top_error = ErrorCode.none
    for r in results:
        if r.partition < 0:
            top_error = r.error.code
            continue
        by_topic.setdefault(r.topic, []).append(
            build(part_cls, partition_id=i32(r.partition), error_code=r.error.code, error_message=r.error.message)
        )
    return build(
        rt,
        throttle_time=datetime.timedelta(0),
        error_code=top_error,
        replica_election_results=tuple(build(topic_cls, topic=t, partition_result=tuple(ps)) for t, ps in by_topic.items()),
    )
