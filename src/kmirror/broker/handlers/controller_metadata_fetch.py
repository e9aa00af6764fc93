"""Fetch (key 1) on the controller plane: brokers and the other voters replicate the metadata
log from here.

Only `__cluster_metadata` partition 0 (by name, or by Kafka's fixed metadata topic id
AAAAAAAAAAAAAAAAAAAAAQ from v13). The answer carries the stored records from `fetch_offset`
as RecordBatch v2 (offsets and leader epochs kept, one batch per epoch) and the high
watermark: with one voter every flushed record is committed; with several (KIP-595), a
broker reads only below the high watermark, a voter up to the log end, and the leader checks
the voter's last fetched epoch (DivergingEpoch) and moves the high watermark. A voter that is
not the leader answers voters NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH with the leader it knows, and closes a broker's connection (NOT_CONTROLLER:
its channel goes on to the next voter). With nothing new the request
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
from kmirror.metadata.controller.result import NotControllerError
from kmirror.protocol.entities import build, nested
from kmirror.quorum.state import FetchDiverging, FetchRefused
from kmirror.records.builder import SimpleRecord, build_batch

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)
MAX_RECORDS_PER_FETCH = 2000
REFUSAL_ERRORS = {
    "not_leader": ErrorCode.not_leader_or_follower,
    "fenced": ErrorCode.fenced_leader_epoch,
    "unknown_epoch": ErrorCode.unknown_leader_epoch,
}
"""A `FetchRefused`'s error as Kafka's error code (the quorum client reads it back)."""


@api(1, "Fetch", 4, 17, planes=("controller",))
async def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    by_id = ctx.api_version >= 13
    controller = services.controller_metadata
    fetch_offset = fetcher_epoch = last_fetched_epoch = -1
    for topic in request.topics:
        matches = topic.topic_id == METADATA_TOPIC_ID if by_id else topic.topic == METADATA_TOPIC
        for p in topic.partitions:
            if matches and int(p.partition) == 0:
                fetch_offset = int(p.fetch_offset)
                fetcher_epoch, last_fetched_epoch = int(p.current_leader_epoch), int(p.last_fetched_epoch)
    replica_state = getattr(request, "replica_state", None)  # v15+; before, `replica_id`
    replica_id = int(replica_state.replica_id if replica_state is not None else request.replica_id)
    voter = controller.is_voter(replica_id)
    max_wait_ms = int(request.max_wait.total_seconds() * 1000)
    error = ErrorCode.none
    records: bytes | None = None
    tagged: dict[str, Any] = {}
    snapshot = controller.latest_snapshot
    below_start = 0 <= fetch_offset < controller.log_start_offset
    decision = None
    if controller.quorum is not None and not voter and not controller.active:
        raise NotControllerError(f"a broker's metadata fetch: {controller.config.node_id} is not the active controller")
    if fetch_offset >= 0 and not voter:
        controller.observer_fetched(replica_id, fetch_offset)
    elif voter and fetch_offset >= 0 and not below_start:
        decision = controller.quorum_fetch(replica_id, fetcher_epoch, fetch_offset, last_fetched_epoch)
    end = controller.readable_end(voter)
    if isinstance(decision, FetchRefused):
        error = REFUSAL_ERRORS[decision.error]
        tagged["current_leader"] = build(nested(rt, "LeaderIdAndEpoch"), leader_id=i32(decision.leader_id),
                                         leader_epoch=i32(decision.epoch))
    elif isinstance(decision, FetchDiverging):
        # no epoch in common ((-1, -1), which the wire reads as "not diverging"): truncate to 0
        tagged["diverging_epoch"] = build(nested(rt, "EpochEndOffset"), epoch=i32(max(decision.epoch, 0)),
                                          end_offset=i64(max(decision.end_offset, 0)))
    elif fetch_offset < 0:
        error = ErrorCode.unknown_topic_or_partition
    elif fetch_offset > end or (below_start and (snapshot is None or ctx.api_version < 12)):
        error = ErrorCode.offset_out_of_range
    elif below_start and snapshot is not None:
        tagged["snapshot_id"] = build(nested(rt, "SnapshotId"), end_offset=i64(snapshot.end_offset),
                                      epoch=i32(snapshot.epoch))
    else:
        await controller.wait_for_records(fetch_offset, max_wait_ms, voter=voter)
        end = controller.readable_end(voter)
        entries = controller.read_entries(fetch_offset, min(MAX_RECORDS_PER_FETCH, end - fetch_offset))
        if entries:
            now = services.clock.now_ms()
            records = b"".join(  # one batch per leader epoch: a voter keeps each record's epoch
                build_batch([SimpleRecord(None, data, (), now) for _, data in entries[start - fetch_offset:stop - fetch_offset]],
                            base_offset=start, partition_leader_epoch=epoch)
                for epoch, start, stop in controller.epoch_ranges(fetch_offset, fetch_offset + len(entries)))
    part_cls = nested(rt, "PartitionData")
    topic_cls = nested(rt, "FetchableTopicResponse")
    hw = controller.high_watermark
    partition = build(
        part_cls,
        partition_index=i32(0),
        error_code=error,
        high_watermark=i64(hw),
        last_stable_offset=i64(hw),
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
