"""AssignReplicasToDirs (key 73, v0, controller plane, KIP-858): a broker names the log
directory of replicas it hosts. The records and per-replica errors come from
`metadata.controller.log_dirs.assign_replicas_to_dirs`."""

from __future__ import annotations

import datetime
from typing import Any

from kio.static.primitive import i32

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.metadata.controller.log_dirs import DirAssignment
from kmirror.protocol.entities import build, nested


@api(73, "AssignReplicasToDirs", 0, 0, planes=("controller",))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    asked = [(d.id_, [(t.topic_id, [int(p.partition_index) for p in t.partitions]) for t in d.topics])
             for d in request.directories]
    assignments = [DirAssignment(d, t, p) for d, topics in asked for t, ps in topics for p in ps]
    error, errors = await services.controller_metadata.assign_replicas_to_dirs(
        int(request.broker_id), int(request.broker_epoch), assignments)
    rt = ctx.response_type
    part_cls, topic_cls, dir_cls = nested(rt, "PartitionData"), nested(rt, "TopicData"), nested(rt, "DirectoryData")
    directories = []
    for d, topics in asked:
        answered = []
        for t, ps in topics:
            parts = tuple(build(part_cls, partition_index=i32(p),
                                error_code=(errors.get(DirAssignment(d, t, p)) or error).code) for p in ps)
            answered.append(build(topic_cls, topic_id=t, partitions=parts))
        directories.append(build(dir_cls, id_=d, topics=tuple(answered)))
    return build(rt, throttle_time=datetime.timedelta(0), error_code=error.code, directories=tuple(directories))
