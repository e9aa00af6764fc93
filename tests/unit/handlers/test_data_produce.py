import dataclasses
import datetime
from uuid import UUID, uuid4

import pytest

from kmirror.broker.handlers.produce import handle
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode
from kmirror.records.builder import build_batch
from kmirror.testing.replication import call_handler, data_services, request_type, single_node_image
from kmirror.types import TopicPartition

T_ID = uuid4()
BATCH = build_batch([(b"k", b"v", (), 1_700_000_000_000)])


def produce(version: int, acks: int, parts: dict[str | UUID, list[tuple[int, bytes | None]]]) -> object:
    rt = request_type(0, version)
    TopicData = nested(rt, "TopicProduceData")
    PartitionData = nested(rt, "PartitionProduceData")
    topics = tuple(
        build(
            TopicData,
            name=key if isinstance(key, str) else "",
            topic_id=key if isinstance(key, UUID) else UUID(int=0),
            partition_data=tuple(PartitionData(index=i, records=r) for i, r in ps),
        )
        for key, ps in parts.items()
    )
    return build(rt, transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=30), topic_data=topics)


@pytest.mark.parametrize("version", [3, 7, 8, 9, 10, 11, 12])
def test_produce_appends_and_answers_offsets_per_version(version: int) -> None:
    services = data_services(single_node_image(1, {"t": (T_ID, 2)}))
    response = call_handler(handle, services, 0, version, produce(version, -1, {"t": [(0, BATCH), (1, BATCH)]}))
    (topic,) = response.responses
    assert topic.name == "t"
    assert [(p.index, p.error_code, p.base_offset) for p in topic.partition_responses] == [
        (0, ErrorCode.none, 0),
        (1, ErrorCode.none, 0),
    ]
    response = call_handler(handle, services, 0, version, produce(version, 1, {"t": [(0, BATCH)]}))
    (p,) = response.responses[0].partition_responses
    assert p.base_offset == 1
    if version >= 5:
        assert p.log_start_offset == 0
    assert p.log_append_time is None  # CreateTime topic: -1 on the wire
    partition = services.replica_manager.get_partition(TopicPartition("t", 0))
    assert partition.high_watermark == 2


def test_produce_unknown_topic_and_missing_records() -> None:
    services = data_services(single_node_image(1, {"t": (T_ID, 1)}))
    response = call_handler(handle, services, 0, 9, produce(9, 1, {"nope": [(0, BATCH)], "t": [(0, None), (3, BATCH)]}))
    codes = {(t.name, p.index): p.error_code for t in response.responses for p in t.partition_responses}
    assert codes == {
        ("nope", 0): ErrorCode.unknown_topic_or_partition,
        ("t", 0): ErrorCode.invalid_record,
        ("t", 3): ErrorCode.unknown_topic_or_partition,
    }
    assert all(p.base_offset == -1 for t in response.responses for p in t.partition_responses)


def test_produce_acks_zero_sends_no_response_but_appends() -> None:
    services = data_services(single_node_image(1, {"t": (T_ID, 1)}))
    assert call_handler(handle, services, 0, 9, produce(9, 0, {"t": [(0, BATCH)]})) is None
    assert services.replica_manager.get_partition(TopicPartition("t", 0)).log.log_end_offset == 1


def test_produce_invalid_acks() -> None:
    services = data_services(single_node_image(1, {"t": (T_ID, 1)}))
    response = call_handler(handle, services, 0, 9, produce(9, 5, {"t": [(0, BATCH)]}))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.invalid_required_acks


def test_produce_v13_by_topic_id() -> None:
    services = data_services(single_node_image(1, {"t": (T_ID, 1)}))
    unknown = uuid4()
    response = call_handler(handle, services, 0, 13, produce(13, 1, {T_ID: [(0, BATCH)], unknown: [(0, BATCH)]}))
    by_id = {t.topic_id: t.partition_responses[0].error_code for t in response.responses}
    assert by_id == {T_ID: ErrorCode.none, unknown: ErrorCode.unknown_topic_id}


def test_produce_not_leader_names_the_current_leader() -> None:
    from kmirror.metadata.image import PartitionRegistration
    from kmirror.testing.replication import image_with

    image = image_with({"t": (T_ID, {0: PartitionRegistration((1, 2), (1, 2), 2, 7, 0)})})
    services = data_services(image)
    response = call_handler(handle, services, 0, 10, produce(10, 1, {"t": [(0, BATCH)]}))
    p = response.responses[0].partition_responses[0]
    assert p.error_code == ErrorCode.not_leader_or_follower
    assert (p.current_leader.leader_id, p.current_leader.leader_epoch) == (2, 7)


def test_acks_all_waits_for_the_isr_and_times_out() -> None:
    from kmirror.metadata.image import PartitionRegistration
    from kmirror.testing.replication import image_with

    image = image_with({"t": (T_ID, {0: PartitionRegistration((1, 2), (1, 2), 1, 0, 0)})})
    services = data_services(image)
    request = produce(9, -1, {"t": [(0, BATCH)]})
    request = dataclasses.replace(request, timeout=datetime.timedelta(milliseconds=1))
    response = call_handler(handle, services, 0, 9, request)
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.request_timed_out
    # acks=1 does not wait for the follower.
    response = call_handler(handle, services, 0, 9, produce(9, 1, {"t": [(0, BATCH)]}))
    assert response.responses[0].partition_responses[0].base_offset == 1


def test_log_append_time_topics_answer_the_broker_time() -> None:
    services = data_services(
        single_node_image(1, {"t": (T_ID, 1)}, configs={"t": {"message.timestamp.type": "LogAppendTime"}})
    )
    now_ms = services.clock.now_ms()
    response = call_handler(handle, services, 0, 9, produce(9, 1, {"t": [(0, BATCH)]}))
    p = response.responses[0].partition_responses[0]
    assert p.error_code == ErrorCode.none
    assert p.log_append_time == datetime.datetime.fromtimestamp(now_ms / 1000, tz=datetime.UTC)


def test_min_insync_replicas_from_topic_config() -> None:
    services = data_services(single_node_image(1, {"t": (T_ID, 1)}, configs={"t": {"min.insync.replicas": "2"}}))
    response = call_handler(handle, services, 0, 9, produce(9, -1, {"t": [(0, BATCH)]}))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.not_enough_replicas
    response = call_handler(handle, services, 0, 9, produce(9, 1, {"t": [(0, BATCH)]}))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.none


def test_corrupt_batch_is_corrupt_message() -> None:
    services = data_services(single_node_image(1, {"t": (T_ID, 1)}))
    corrupt = bytearray(BATCH)
    corrupt[-1] ^= 0xFF
    response = call_handler(handle, services, 0, 9, produce(9, 1, {"t": [(0, bytes(corrupt))]}))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.corrupt_message
