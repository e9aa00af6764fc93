"""FetchSnapshot (key 59, controller plane, KIP-630): a broker whose metadata log ends below the
controller's log start offset downloads the latest snapshot, a chunk of bytes at a time.

Only `__cluster_metadata` partition 0. A snapshot id the controller does not hold (deleted by
retention meanwhile) is SNAPSHOT_NOT_FOUND, a position outside it POSITION_OUT_OF_RANGE, as
Kafka's leader answers; the broker then fetches again and learns the newer snapshot's id.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from kmirror.broker.api import RequestContext, api
from kmirror.broker.handlers.controller_metadata_fetch import METADATA_TOPIC
from kmirror.broker.services import BrokerServices
from kmirror.metadata.snapshot_service import SnapshotId
from kmirror.protocol.entities import build, nested

MAX_CHUNK_BYTES = 8 * 1024 * 1024


@api(59, "FetchSnapshot", 0, 1, planes=("controller",))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    controller = services.controller_metadata
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            wanted = SnapshotId(int(p.snapshot_id.end_offset), int(p.snapshot_id.epoch))
            position = int(p.position)
            error, size, chunk = ErrorCode.none, -1, b""
            found = controller.read_snapshot(wanted, max(position, 0), min(int(request.max_bytes), MAX_CHUNK_BYTES))
            if topic.name != METADATA_TOPIC or int(p.partition) != 0:
                error = ErrorCode.unknown_topic_or_partition
            elif found is None:
                error = ErrorCode.snapshot_not_found
            elif not 0 <= position < found[0]:
                error = ErrorCode.position_out_of_range
            else:
                size, chunk = found
            partitions.append(build(
                nested(rt, "PartitionSnapshot"),
                index=i32(int(p.partition)),
                error_code=error,
                snapshot_id=build(nested(rt, "SnapshotId"), end_offset=i64(wanted.end_offset), epoch=i32(wanted.epoch)),
                current_leader=build(nested(rt, "LeaderIdAndEpoch"), leader_id=i32(controller.controller_id),
                                     leader_epoch=i32(0)),
                size=i64(size),
                position=i64(position),
                unaligned_records=chunk,
            ))
        topics.append(build(nested(rt, "TopicSnapshot"), name=topic.name, partitions=tuple(partitions)))
    return build(rt, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, topics=tuple(topics))
