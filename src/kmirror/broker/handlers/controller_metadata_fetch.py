"""Fetch (key 1) on the controller plane: brokers replicate the metadata log from here.

Only `__cluster_metadata` partition 0 (by name, or by Kafka's fixed metadata topic id
AAAAAAAAAAAAAAAAAAAAAQ from v13). The answer carries the stored records from `fetch_offset`
as one RecordBatch v2 (offsets kept) and the high watermark, which is the log end offset:
with one active controller every flushed record is committed. With nothing new the request
waits up to `max_wait_ms` and completes as soon as the controller appends (long poll), so
brokers learn of changes without polling delay. A fetch below the log start offset (the log
before the latest snapshot was deleted) is answered, as KRaft's leader does, with the latest
snapshot's id (tagged field, v12+) and no records: the broker then fetches the snapshot
(FetchSnapshot). See docs/design/controller.md.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i32, i64

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested
from kmirror.records.builder import SimpleRecord, build_batch

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)
MAX_RECORDS_PER_FETCH = 2000


@api(1, "Fetch", 4, 17, planes=("controller",))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    by_id = ctx.api_version >= 13
    controller = services.controller_metadata
    fetch_offset = -1
    for topic in request.topics:
        matches = topic.topic_id == METADATA_TOPIC_ID if by_id else topic.topic == METADATA_TOPIC
        for p in topic.partitions:
            if matches and int(p.partition) == 0:
                fetch_offset = int(p.fetch_offset)
    replica_state = getattr(request, "replica_state", None)  # v15+; before, `replica_id`
    replica_id = int(replica_state.replica_id if replica_state is not None else request.replica_id)
    if fetch_offset >= 0:
        controller.observer_fetched(replica_id, fetch_offset)
    max_wait_ms = int(request.max_wait.total_seconds() * 1000)
    error = ErrorCode.none
    records: bytes | None = None
    tagged: dict[str, Any] = {}
    snapshot = controller.latest_snapshot
    below_start = 0 <= fetch_offset < controller.log_start_offset
    if fetch_offset < 0:
        error = ErrorCode.unknown_topic_or_partition
    elif fetch_offset > controller.log_end_offset or (below_start and (snapshot is None or ctx.api_version < 12)):
        error = ErrorCode.offset_out_of_range
    elif below_start and snapshot is not None:
        tagged["snapshot_id"] = build(nested(rt, "SnapshotId"), end_offset=i64(snapshot.end_offset),
                                      epoch=i32(snapshot.epoch))
    else:
        await controller.wait_for_records(fetch_offset, max_wait_ms)
        entries = controller.read_entries(fetch_offset, MAX_RECORDS_PER_FETCH)
        if entries:
            now = services.clock.now_ms()
            records = build_batch([SimpleRecord(None, data, (), now) for _, data in entries], base_offset=entries[0][0])
    part_cls = nested(rt, "PartitionData")
    topic_cls = nested(rt, "FetchableTopicResponse")
    end = controller.log_end_offset
    partition = build(
        part_cls,
        partition_index=i32(0),
        error_code=error,
        high_watermark=i64(end),
        last_stable_offset=i64(end),
        log_start_offset=i64(controller.log_start_offset),
        aborted_transactions=None,
        preferred_read_replica=i32(-1),
        records=records,
        **tagged,
    )
    topic_resp = build(topic_cls, topic=METADATA_TOPIC, topic_id=METADATA_TOPIC_ID, partitions=(partition,))
    return build(
        rt, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, session_id=i32(0), responses=(topic_resp,)
    )
