"""Fetch and Produce handlers with replication: follower fetches, diverging epochs,
preferred read replicas (KIP-392), acks=all over the ISR and min.insync.replicas."""

import asyncio
import datetime
import uuid
from uuid import uuid4

from kmirror.broker.api import RequestContext
from kmirror.broker.handlers.fetch import handle as fetch_handle
from kmirror.broker.handlers.offsets_for_leader_epoch import handle as epoch_handle
from kmirror.broker.handlers.produce import handle as produce_handle
from kmirror.metadata.image import BrokerRegistration, PartitionRegistration
from kmirror.protocol.codec import RequestHeaderView
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.records.builder import build_batch
from kmirror.testing.replication import call_handler, data_services, image_with, request_type
from kmirror.types import TopicPartition

T_ID = uuid4()
TP = TopicPartition("t", 0)
BATCH = build_batch([(b"k", b"v", (), 1_700_000_000_000)])


def services(isr: tuple[int, ...] = (1, 2, 3), min_isr: str = "1", leader: int = 1, epoch: int = 4):
    image = image_with(
        {"t": (T_ID, {0: PartitionRegistration((1, 2, 3), isr, leader, epoch, 0)})},
        configs={"t": {"min.insync.replicas": min_isr}},
    )
    return data_services(image)


def produce_request(acks: int, timeout_ms: int = 30_000) -> object:
    rt = request_type(0, 9)
    TopicData = nested(rt, "TopicProduceData")
    PartitionData = nested(rt, "PartitionProduceData")
    topic = build(TopicData, name="t", partition_data=(PartitionData(index=0, records=BATCH),))
    return build(rt, transactional_id=None, acks=acks, timeout=datetime.timedelta(milliseconds=timeout_ms), topic_data=(topic,))


def follower_fetch(version: int, replica: int, offset: int, last_epoch: int = -1, current_epoch: int = -1, rack: str = "") -> object:
    rt = request_type(1, version)
    part = build(
        nested(rt, "FetchPartition"),
        partition=0,
        fetch_offset=offset,
        partition_max_bytes=1 << 20,
        current_leader_epoch=current_epoch,
        last_fetched_epoch=last_epoch,
        log_start_offset=0,
    )
    topic = build(nested(rt, "FetchTopic"), topic="t", topic_id=T_ID if version >= 13 else uuid.UUID(int=0), partitions=(part,))
    fields: dict[str, object] = {}
    if version >= 15:
        fields["replica_state"] = nested(rt, "ReplicaState")(replica_id=replica, replica_epoch=-1)
    return build(
        rt, replica_id=replica, max_wait=datetime.timedelta(0), min_bytes=0, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1, topics=(topic,), forgotten_topics_data=(), rack_id=rack, **fields,
    )


def only_partition(response):
    return response.responses[0].partitions[0]


def test_follower_fetch_reads_past_the_hw_and_advances_it_v12_and_v15() -> None:
    svc = services()
    svc.replica_manager.append_records({TP: BATCH}, 1)
    p = only_partition(call_handler(fetch_handle, svc, 1, 12, follower_fetch(12, 2, 0)))
    assert p.error_code == ErrorCode.none and len(p.records) > 0 and p.high_watermark == 0
    call_handler(fetch_handle, svc, 1, 15, follower_fetch(15, 2, 1))
    p = only_partition(call_handler(fetch_handle, svc, 1, 15, follower_fetch(15, 3, 1)))
    assert p.high_watermark == 1
    assert svc.replica_manager.get_partition(TP).replica_log_end_offsets == {2: 1, 3: 1}


def test_follower_fetch_answers_diverging_epoch() -> None:
    svc = services(epoch=4)
    svc.replica_manager.append_records({TP: BATCH}, 1)  # epoch 4 starts at 0
    p = only_partition(call_handler(fetch_handle, svc, 1, 12, follower_fetch(12, 2, 5, last_epoch=3)))
    assert p.error_code == ErrorCode.none
    assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (3, 0)
    assert p.records in (b"", None)


def test_follower_fetch_on_a_follower_is_not_leader() -> None:
    svc = services(leader=2)
    p = only_partition(call_handler(fetch_handle, svc, 1, 12, follower_fetch(12, 3, 0)))
    assert p.error_code == ErrorCode.not_leader_or_follower


def test_offsets_for_leader_epoch_from_a_follower() -> None:
    svc = services(epoch=4)
    svc.replica_manager.append_records({TP: BATCH}, 1)
    rt = request_type(23, 4)
    req = build(
        rt, replica_id=2,
        topics=(nested(rt, "OffsetForLeaderTopic")(topic="t", partitions=(nested(rt, "OffsetForLeaderPartition")(partition=0, current_leader_epoch=4, leader_epoch=4),)),),
    )
    out = call_handler(epoch_handle, svc, 23, 4, req).topics[0].partitions[0]
    assert (out.error_code, out.leader_epoch, out.end_offset) == (ErrorCode.none, 4, 1)


def test_preferred_read_replica_in_the_consumers_rack() -> None:
    svc = services()
    rm = svc.replica_manager
    svc.config.values["replica.selector.class"] = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
    image = rm.image
    brokers = {i: BrokerRegistration(i, uuid4(), 1, (), f"rack-{i}", False) for i in (1, 2, 3)}
    rm.apply_image(image, image.__class__(**{**{f: getattr(image, f) for f in image.__dataclass_fields__}, "brokers": brokers}))
    rm.append_records({TP: BATCH}, 1)
    for replica in (2, 3):
        call_handler(fetch_handle, svc, 1, 12, follower_fetch(12, replica, 1))
    p = only_partition(call_handler(fetch_handle, svc, 1, 12, follower_fetch(12, -1, 0, rack="rack-3")))
    assert p.preferred_read_replica == 3 and p.records in (b"", None)
    here = only_partition(call_handler(fetch_handle, svc, 1, 12, follower_fetch(12, -1, 0, rack="rack-1")))
    assert here.preferred_read_replica == -1 and len(here.records) > 0
    elsewhere = only_partition(call_handler(fetch_handle, svc, 1, 12, follower_fetch(12, -1, 0, rack="rack-9")))
    assert elsewhere.preferred_read_replica == -1


def test_acks_all_below_min_isr_is_not_enough_replicas() -> None:
    svc = services(isr=(1,), min_isr="2")
    out = call_handler(produce_handle, svc, 0, 9, produce_request(-1))
    assert out.responses[0].partition_responses[0].error_code == ErrorCode.not_enough_replicas


def test_acks_all_completes_when_the_isr_has_fetched() -> None:
    svc = services(isr=(1, 2), min_isr="2")
    rm = svc.replica_manager

    async def run() -> object:
        ctx = RequestContext(RequestHeaderView(0, 9, 1, "t"), _response_type(0, 9), "127.0.0.1", 1)
        task = asyncio.ensure_future(produce_handle(svc, ctx, produce_request(-1)))
        await asyncio.sleep(0)
        assert not task.done()
        from kmirror.replication.replica_manager import FetchPartitionRequest

        rm.fetch([FetchPartitionRequest(TP, 1, 1 << 20)], 1 << 20, 0, replica_id=2)
        return await asyncio.wait_for(task, 5)

    out = asyncio.run(run())
    part = out.responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.none and part.base_offset == 0


def test_acks_all_after_isr_shrink_is_not_enough_replicas_after_append() -> None:
    svc = services(isr=(1, 2), min_isr="2")
    rm = svc.replica_manager

    async def run() -> object:
        ctx = RequestContext(RequestHeaderView(0, 9, 1, "t"), _response_type(0, 9), "127.0.0.1", 1)
        task = asyncio.ensure_future(produce_handle(svc, ctx, produce_request(-1)))
        await asyncio.sleep(0)
        rm.clock.advance(30_001)
        (item,) = rm.maybe_shrink_isr()
        from kmirror.replication.partition import PartitionState

        rm.handle_alter_partition_response(item, 0, PartitionState(1, 4, 1, (1, 2, 3), (1,)))
        return await asyncio.wait_for(task, 5)

    part = asyncio.run(run()).responses[0].partition_responses[0]
    assert part.error_code == ErrorCode.not_enough_replicas_after_append


def test_acks_all_times_out_when_the_follower_never_fetches() -> None:
    svc = services(isr=(1, 2))
    out = call_handler(produce_handle, svc, 0, 9, produce_request(-1, timeout_ms=1))
    assert out.responses[0].partition_responses[0].error_code == ErrorCode.request_timed_out


def _response_type(key: int, version: int) -> type:
    from kio.index import load_response_schema

    return load_response_schema(key, version)


def test_diverging_epoch_is_answered_without_waiting() -> None:
    svc = services(epoch=4)
    svc.replica_manager.append_records({TP: BATCH}, 1)
    request = follower_fetch(12, 2, 1, last_epoch=3)
    import dataclasses

    request = dataclasses.replace(request, max_wait=datetime.timedelta(seconds=30), min_bytes=1)
    p = only_partition(call_handler(fetch_handle, svc, 1, 12, request))
    assert p.diverging_epoch.end_offset == 0
